#include "nn/embedding.h"

#include <sstream>

#include "autograd/ops_index.h"
#include "core/factory.h"
#include "nn/init.h"

namespace sg::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options, Generator* generator)
    : num_embeddings(num_embeddings),
      embedding_dim(embedding_dim),
      options(options) {
  SG_CHECK(num_embeddings >= 0 && embedding_dim >= 0, "Embedding: sizes must be non-negative, got num_embeddings ",
           num_embeddings, ", embedding_dim ", embedding_dim);
  // Checked and wrapped here, as PyTorch does, so that a bad padding_idx fails where the layer is made.
  this->options.padding_idx = wrap_padding_idx(options.padding_idx, num_embeddings, "Embedding");
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters(generator);
}

Embedding::Embedding(const Tensor& embeddings, bool freeze, EmbeddingOptions options) : options(options) {
  SG_CHECK(embeddings.dim() == 2,
           "Embedding::from_pretrained: embeddings must be 2-D [num_embeddings, embedding_dim], "
           "got shape ",
           shape_str(embeddings.sizes()));
  num_embeddings = embeddings.size(0);
  embedding_dim = embeddings.size(1);
  this->options.padding_idx = wrap_padding_idx(options.padding_idx, num_embeddings, "Embedding");
  // A new handle on the same memory: the caller's tensor keeps its own requires_grad.
  weight = register_parameter("weight", embeddings.detach(), /*requires_grad=*/!freeze);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze, EmbeddingOptions options) {
  return std::shared_ptr<Embedding>(new Embedding(embeddings, freeze, options));  // that constructor is private
}

void Embedding::reset_parameters(Generator* generator) {
  init::normal_(weight, 0.0, 1.0, generator);
  if (options.padding_idx) init::zeros_(weight.detach().select(0, *options.padding_idx));
}

Tensor Embedding::forward(const Tensor& indices) {
  if (options.max_norm) embedding_renorm_(weight, indices, *options.max_norm, options.norm_type);
  return embedding(weight, indices, options.padding_idx);
}

std::string Embedding::extra_repr() const {
  std::ostringstream out;
  out << num_embeddings << ", " << embedding_dim;
  if (options.padding_idx) out << ", padding_idx=" << *options.padding_idx;
  if (options.max_norm) out << ", max_norm=" << *options.max_norm;
  if (options.norm_type != 2.0) out << ", norm_type=" << options.norm_type;
  return out.str();
}

}  // namespace sg::nn
