#pragma once
// defines: nn::Embedding, nn::EmbeddingOptions — a lookup table of learned vectors, one per
//          token id, as torch.nn.Embedding (the op itself: embedding in autograd/ops_index.h).
#include <memory>
#include <optional>
#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace sg::nn {

// Defaults are torch.nn.Embedding's. Written as nn::Embedding(vocab, 64, {.padding_idx = 0}).
struct EmbeddingOptions {
  // This row (negative: counted from the end) starts at zero, when the layer draws its weight,
  // and never receives a gradient: the vector of a padding token stays what it is.
  std::optional<int64_t> padding_idx = std::nullopt;
  // Before each lookup, the looked-up rows whose norm_type-norm exceeds max_norm are scaled
  // down to it, in place (embedding_renorm_).
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;
};

// weight [num_embeddings, embedding_dim], drawn from N(0, 1). forward maps i64 (or i32) indices
// of any shape to [..., embedding_dim]; an index outside [0, num_embeddings) throws naming it
// and num_embeddings. Lookups of the same row add their gradients into that row.
class Embedding : public Module {
public:
  // `generator` draws the initial weight (the default generator when null).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {},
            Generator* generator = nullptr);
  // A layer whose weight is `embeddings` ([num_embeddings, embedding_dim]; shares its memory, as
  // PyTorch's does), frozen (no gradient) unless freeze is false. The padding row is kept as given.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    EmbeddingOptions options = {});

  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  // As PyTorch prints it: "10, 3, padding_idx=0".
  std::string extra_repr() const override;
  // Draws a fresh N(0, 1) weight, the padding row zeroed, as at construction.
  void reset_parameters(Generator* generator = nullptr);

  int64_t num_embeddings, embedding_dim;
  EmbeddingOptions options;  // padding_idx is stored wrapped (non-negative)
  Tensor weight;

private:
  Embedding(const Tensor& embeddings, bool freeze, EmbeddingOptions options);  // from_pretrained
};

}  // namespace sg::nn
