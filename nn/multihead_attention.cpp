// nn::MultiheadAttention, following torch.nn.functional.multi_head_attention_forward step by step:
// project, turn the masks into one additive float mask, append bias_k / bias_v and the zero key,
// split the heads (views, no copies), attend, merge the heads, project out. Unlike PyTorch, a
// batch_first input is not transposed to [L, N, E] first: every step works on the layout it is
// given, so that the projections of a contiguous [N, L, E] input are each one GEMM over N * L rows
// and no transposed copy is made on the way in or out.
#include "nn/multihead_attention.h"

#include <cmath>
#include <limits>

#include "autograd/ops_attention.h"
#include "autograd/ops_index.h"
#include "autograd/ops_linalg.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "core/factory.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace sg::nn {

namespace {

constexpr const char* kName = "MultiheadAttention";

// A mask as PyTorch's _canonical_mask makes it: bool true (not allowed) becomes -inf, false 0, in
// `dtype`; a float mask is added as it is.
Tensor additive_mask(const Tensor& mask, DType dtype) {
  if (mask.dtype() == DType::boolean)
    return masked_fill(zeros(mask.sizes(), {dtype, mask.device()}), mask, -std::numeric_limits<double>::infinity());
  SG_CHECK(is_floating(mask.dtype()), kName, ": a mask must be bool or floating, got ", mask.dtype());
  return mask.to(dtype);
}

// The mask with a zero column appended to its last dim: a key appended by the module (bias_k, the
// zero key) is never masked.
Tensor with_open_column(const Tensor& mask) {
  Shape column = mask.sizes();
  column.back() = 1;
  return cat({mask, zeros(column, {mask.dtype(), mask.device()})}, -1);
}

// [T, N, E] (seq_dim 0) or [N, T, E] (seq_dim 1) -> [N, H, T, D]: a view when the projection
// allows it (it always does for ours).
Tensor split_heads(const Tensor& x, int64_t heads, int64_t seq_dim) {
  const Tensor split = x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads});
  return seq_dim == 0 ? split.permute({1, 2, 0, 3}) : split.permute({0, 2, 1, 3});
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options,
                                       Generator* generator)
    : embed_dim(embed_dim),
      num_heads(num_heads),
      head_dim(num_heads > 0 ? embed_dim / num_heads : 0),
      kdim(options.kdim.value_or(embed_dim)),
      vdim(options.vdim.value_or(embed_dim)),
      options(options),
      generator(generator) {
  SG_CHECK(embed_dim > 0 && num_heads > 0, kName, ": embed_dim and num_heads must be greater than 0, got embed_dim ",
           embed_dim, " and num_heads ", num_heads);
  SG_CHECK(head_dim * num_heads == embed_dim, kName, ": embed_dim ", embed_dim, " is not divisible by num_heads ",
           num_heads);
  if (kdim == embed_dim && vdim == embed_dim) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({embed_dim, embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", empty({embed_dim, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({embed_dim, vdim}));
  }
  if (options.bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * embed_dim}));
  // PyTorch's NonDynamicallyQuantizableLinear: a Linear, with a Linear's initialisation.
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias, generator));
  if (options.add_bias_kv) {
    bias_k = register_parameter("bias_k", empty({1, 1, embed_dim}));
    bias_v = register_parameter("bias_v", empty({1, 1, embed_dim}));
  }
  reset_parameters(generator);
}

void MultiheadAttention::reset_parameters(Generator* generator) {
  // PyTorch's _reset_parameters: out_proj.weight keeps the Linear initialisation it was built with.
  for (const Tensor& weight : {in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight})
    if (weight.defined()) init::xavier_uniform_(weight, 1.0, generator);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k, 1.0, generator);
  if (bias_v.defined()) init::xavier_normal_(bias_v, 1.0, generator);
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const MultiheadAttentionForwardOptions& options) {
  SG_CHECK((query.dim() == 3 || query.dim() == 2) && key.dim() == query.dim() && value.dim() == query.dim(), kName,
           ": query, key and value must all be batched (3-D) or all unbatched (2-D), got ", shape_str(query.sizes()),
           ", ", shape_str(key.sizes()), " and ", shape_str(value.sizes()));
  if (query.dim() == 2) {  // unbatched: a batch of one
    MultiheadAttentionForwardOptions batched = options;
    if (options.key_padding_mask.defined()) batched.key_padding_mask = options.key_padding_mask.unsqueeze(0);
    const int64_t batch_dim = this->options.batch_first ? 0 : 1;
    const auto [out, weights] =
        forward(query.unsqueeze(batch_dim), key.unsqueeze(batch_dim), value.unsqueeze(batch_dim), batched);
    return {out.squeeze(batch_dim), weights.defined() ? weights.squeeze(0) : weights};
  }
  // [L, N, E] or, batch_first, [N, L, E]: the sequence dim and the batch dim.
  const int64_t seq_dim = this->options.batch_first ? 1 : 0, batch_dim = 1 - seq_dim;
  const int64_t L = query.size(seq_dim), N = query.size(batch_dim), E = embed_dim;
  SG_CHECK(query.size(2) == E, kName, ": query of shape ", shape_str(query.sizes()), " does not match embed_dim ", E);
  SG_CHECK(key.size(2) == kdim && value.size(2) == vdim, kName, ": key of shape ", shape_str(key.sizes()),
           " and value of shape ", shape_str(value.sizes()), " do not match kdim ", kdim, " and vdim ", vdim);
  SG_CHECK(key.size(seq_dim) == value.size(seq_dim) && key.size(batch_dim) == N && value.size(batch_dim) == N, kName,
           ": key of shape ", shape_str(key.sizes()), " and value of shape ", shape_str(value.sizes()),
           " must share the sequence and batch sizes of each other, and the batch size of query of shape ",
           shape_str(query.sizes()));
  int64_t S = key.size(seq_dim);

  // The projections: one linear each, also for self-attention (where PyTorch runs one GEMM
  // against the packed weight and takes q, k, v as column ranges of its output). Column ranges are
  // narrow() views, whose backward writes each gradient into a zero tensor of the packed width,
  // which the engine then sums: three fills, three copies and two sums of [N, L, 3E] per step that
  // three products of the same FLOPs do not need (docs/performance.md, "minGPT's step").
  const TensorList w =
      in_proj_weight.defined() ? in_proj_weight.chunk(3, 0) : TensorList{q_proj_weight, k_proj_weight, v_proj_weight};
  const TensorList b = in_proj_bias.defined() ? in_proj_bias.chunk(3, 0) : TensorList{Tensor(), Tensor(), Tensor()};
  Tensor q = linear(query, w[0], b[0]);  // [L, N, E] (batch_first: [N, L, E])
  Tensor k = linear(key, w[1], b[1]);    // [S, N, E] (batch_first: [N, S, E])
  Tensor v = linear(value, w[2], b[2]);  // [S, N, E] (batch_first: [N, S, E])

  // The masks, as one additive float mask that broadcasts to [N, H, L, S].
  SG_CHECK(!options.is_causal || options.attn_mask.defined(), kName,
           ": is_causal is a hint that attn_mask is the causal mask, so it needs attn_mask (as in PyTorch)");
  const bool causal_kernel = options.is_causal && !options.key_padding_mask.defined() && !options.need_weights;
  Tensor mask;
  if (options.attn_mask.defined() && !causal_kernel) {
    const Tensor& m = options.attn_mask;
    const bool fits =
        (m.dim() == 2 && m.sizes() == Shape{L, S}) || (m.dim() == 3 && m.sizes() == Shape{N * num_heads, L, S});
    SG_CHECK(fits, kName, ": attn_mask of shape ", shape_str(m.sizes()), " should be ", shape_str({L, S}), " or ",
             shape_str({N * num_heads, L, S}), " (query of shape ", shape_str(query.sizes()), ", key of shape ",
             shape_str(key.sizes()), ")");
    mask = additive_mask(m, q.dtype()).reshape(m.dim() == 2 ? Shape{1, 1, L, S} : Shape{N, num_heads, L, S});
  }
  Tensor padding;
  if (options.key_padding_mask.defined()) {
    const Tensor& m = options.key_padding_mask;
    SG_CHECK(m.sizes() == Shape({N, S}), kName, ": key_padding_mask of shape ", shape_str(m.sizes()), " should be ",
             shape_str({N, S}), " (key of shape ", shape_str(key.sizes()), ")");
    padding = additive_mask(m, q.dtype()).reshape({N, 1, 1, S});
  }
  // One more key and value at the end of every sequence, which no mask hides.
  Shape one_key{N, E};
  one_key.insert(one_key.begin() + seq_dim, 1);  // [1, N, E] or [N, 1, E]
  auto append_open_key = [&](const Tensor& key_row, const Tensor& value_row) {
    k = cat({k, key_row}, seq_dim);
    v = cat({v, value_row}, seq_dim);
    S += 1;
    if (mask.defined()) mask = with_open_column(mask);
    if (padding.defined()) padding = with_open_column(padding);
  };
  if (bias_k.defined()) append_open_key(bias_k.expand(one_key), bias_v.expand(one_key));
  // PyTorch appends the zero key per (batch entry, head) after splitting the heads; a zero row of
  // all E features here splits into exactly those rows. With it, a query whose keys are all masked
  // still has one to attend to: its weights are defined (not NaN).
  if (this->options.add_zero_attn) {
    const Tensor zero_row = zeros(one_key, {k.dtype(), k.device()});
    append_open_key(zero_row, zero_row);
  }
  if (padding.defined()) mask = mask.defined() ? mask + padding : padding;

  const Tensor qh = split_heads(q, num_heads, seq_dim), kh = split_heads(k, num_heads, seq_dim),
               vh = split_heads(v, num_heads, seq_dim);
  const double dropout_p = is_training() ? this->options.dropout : 0.0;
  Tensor heads, weights;  // [N, H, L, D], [N, H, L, S]
  if (!options.need_weights) {
    heads = scaled_dot_product_attention(
        qh, kh, vh, {.attn_mask = mask, .dropout_p = dropout_p, .is_causal = causal_kernel}, generator);
  } else {
    Tensor scores = matmul(qh * (1.0 / std::sqrt(static_cast<double>(head_dim))), kh.transpose(-2, -1));
    if (mask.defined()) scores = scores + mask;
    weights = softmax(scores, -1);
    if (dropout_p > 0) weights = functional::dropout(weights, dropout_p, /*training=*/true, generator);
    heads = matmul(weights, vh);
    if (options.average_attn_weights) weights = weights.mean({1});
  }
  // [N, H, L, D] -> [L, N, E] or [N, L, E]: a view when the fused op laid its output out as the heads'
  // views are (Note [Attention in the layout of its inputs] in autograd/ops_attention.cpp), a copy
  // after the composed path.
  const Tensor merged =
      seq_dim == 0 ? heads.permute({2, 0, 1, 3}).reshape({L, N, E}) : heads.permute({0, 2, 1, 3}).reshape({N, L, E});
  return {(*out_proj)(merged), weights};
}

}  // namespace sg::nn
