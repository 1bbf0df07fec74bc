#pragma once
// defines: nn::MultiheadAttention, MultiheadAttentionOptions, MultiheadAttentionForwardOptions —
//          as torch.nn.MultiheadAttention: the same parameter names, shapes and initialisation, so a
//          PyTorch state_dict loads with no renaming.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/generator.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace sg::nn {

// Defaults are PyTorch's.
struct MultiheadAttentionOptions {
  double dropout = 0.0;           // on the attention probabilities, in training
  bool bias = true;               // in_proj_bias and out_proj.bias
  bool add_bias_kv = false;       // bias_k, bias_v: one learned key and value appended to every sequence
  bool add_zero_attn = false;     // one zero key and value appended to every sequence (after bias_k, bias_v)
  std::optional<int64_t> kdim{};  // the key's features (default embed_dim)
  std::optional<int64_t> vdim{};  // the value's features (default embed_dim)
  bool batch_first = false;       // inputs and output [N, L, E] rather than [L, N, E]
};

struct MultiheadAttentionForwardOptions {
  Tensor key_padding_mask{};         // [N, S]: bool, true = ignore that key; or float, added
  bool need_weights = true;          // also return the attention weights (the composed path)
  Tensor attn_mask{};                // [L, S] or [N * num_heads, L, S]: bool, true = not allowed; or float, added
  bool average_attn_weights = true;  // weights averaged over heads [N, L, S], else [N, num_heads, L, S]
  // A hint that attn_mask is the causal mask (it must then be given, as in PyTorch); without a
  // key_padding_mask and need_weights false, the fused kernel then runs causal instead of reading it.
  bool is_causal = false;
};

// Parameters (PyTorch's names): in_proj_weight [3E, E] (or q_proj_weight [E, E], k_proj_weight
// [E, kdim], v_proj_weight [E, vdim] when kdim or vdim differs from E), in_proj_bias [3E],
// out_proj.weight [E, E], out_proj.bias [E], bias_k and bias_v [1, 1, E]. Initialised as PyTorch:
// xavier_uniform_ on the projection weights, zero biases, out_proj.weight as a Linear's, and
// xavier_normal_ on bias_k / bias_v.
//
// forward(query [L, N, E], key [S, N, kdim], value [S, N, vdim]) -> (output [L, N, E], weights or
// undefined); unbatched [L, E] inputs give an unbatched output. Without weights, the heads go
// through the fused scaled_dot_product_attention; with them, through softmax(q k^T / sqrt(D) + mask)
// composed of ops, which computes them. The weights have a column for every key, those the module
// appends (bias_k, then the zero key) last. A row whose keys are all masked gives what PyTorch gives:
// NaN on the composed path (softmax of all -inf), 0 on the fused one.
class MultiheadAttention : public Module {
public:
  // `generator` draws the initial values and the dropout masks (the default generator when null).
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {},
                     Generator* generator = nullptr);

  using Module::forward;  // the single-tensor forward stays visible (and throws)
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const MultiheadAttentionForwardOptions& options = {});
  std::string type_name() const override { return "MultiheadAttention"; }
  // Draws fresh initial values, as at construction.
  void reset_parameters(Generator* generator = nullptr);

  int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight;  // the packed one, or the three
  Tensor in_proj_bias, bias_k, bias_v;                                 // undefined when absent
  std::shared_ptr<Linear> out_proj;
  Generator* generator;
};

}  // namespace sg::nn
