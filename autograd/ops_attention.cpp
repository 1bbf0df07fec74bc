// The fused attention front: checks, broadcasts the batch dims (views), reserves the dropout's
// random numbers and records one backward node that runs the fused backward kernel.
#include "autograd/ops_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "core/attention_math.h"
#include "core/factory.h"
#include "core/kernels/attention.h"
#include "core/kernels/pointwise.h"

namespace sg {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

constexpr const char* kName = "scaled_dot_product_attention";

Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// t expanded to the common batch dims (a view), its last dim given a unit stride, as the kernels want.
Tensor kernel_operand(const Tensor& t, const Shape& batch) {
  const Tensor expanded = t.detach().expand(with_matrix(batch, t.size(-2), t.size(-1)));
  return expanded.stride(-1) == 1 || expanded.size(-1) <= 1 ? expanded : kernels::contiguous(expanded);
}

Shape common_batch(const Tensor& q, const Tensor& k, const Tensor& v) {
  SG_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kName, ": query, key and value need at least 2 dims, got ",
           shape_str(q.sizes()), ", ", shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  SG_CHECK(k.size(-1) == q.size(-1), kName, ": query of shape ", shape_str(q.sizes()), " and key of shape ",
           shape_str(k.sizes()), " differ in their last dim (E)");
  SG_CHECK(v.size(-2) == k.size(-2), kName, ": key of shape ", shape_str(k.sizes()), " and value of shape ",
           shape_str(v.sizes()), " differ in their sequence dim (S)");
  const Shape batch = broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k), kName), batch_of(v), kName);
  SG_CHECK(batch.size() <= static_cast<size_t>(math::kMaxAttentionBatchDims), kName, ": at most ",
           math::kMaxAttentionBatchDims, " batch dims, got query of shape ", shape_str(q.sizes()));
  return batch;
}

// Note [Attention in the layout of its inputs]
// MultiheadAttention's heads are views: q [N, L, E] of a projection is split into [N, H, L, D] by a
// reshape and a permute, so its strides say "L outside H". The output and the gradients are
// allocated in the same order of dims (outermost first by their strides, the last dim last),
// so the head merge after the op ([N, H, L, D] -> [N, L, E]) and the backward of the head split
// are views instead of five transposing copies of [N, L, E] per layer, and the kernels read and
// write them through their strides. A contiguous q gives contiguous ones.
Tensor empty_in_layout_of(const Shape& shape, const Tensor& like, const TensorOptions& options) {
  // A broadcast dim (stride 0) counts as the outermost: its gradients are summed over afterwards.
  const auto outer_first = [&](int64_t dim) {
    return like.stride(dim) == 0 ? std::numeric_limits<int64_t>::max() : like.stride(dim);
  };
  std::vector<int64_t> order(shape.size());  // dims from the outermost to the innermost
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end() - 1,
                   [&](int64_t a, int64_t b) { return outer_first(a) > outer_first(b); });
  Shape laid_out, inverse(shape.size());
  for (size_t d = 0; d < order.size(); ++d) {
    laid_out.push_back(shape[order[d]]);
    inverse[order[d]] = static_cast<int64_t>(d);
  }
  return empty(laid_out, options).permute(inverse);
}

// The mask expanded to [batch..., L, S] (a view), or undefined.
Tensor kernel_mask(const AttentionOptions& options, const Tensor& q, const Shape& scores) {
  const Tensor& mask = options.attn_mask;
  if (!mask.defined()) return Tensor();
  SG_CHECK(!options.is_causal, kName, ": attn_mask of shape ", shape_str(mask.sizes()),
           " given with is_causal = true; pass one or the other");
  SG_CHECK(mask.dtype() == DType::boolean || mask.dtype() == q.dtype(), kName, ": attn_mask must be bool or ",
           q.dtype(), " (the query's dtype), got ", mask.dtype());
  SG_CHECK(mask.device() == q.device(), kName, ": attn_mask is on ", mask.device(), " but query is on ", q.device());
  SG_CHECK(!mask.requires_grad(), kName,
           ": attn_mask requires grad, but the fused attention does not differentiate it");
  bool broadcasts = mask.dim() <= static_cast<int64_t>(scores.size());
  for (int64_t d = 1; broadcasts && d <= mask.dim(); ++d) {
    const int64_t size = mask.size(-d), target = scores[scores.size() - d];
    broadcasts = size == 1 || size == target;
  }
  SG_CHECK(broadcasts, kName, ": attn_mask of shape ", shape_str(mask.sizes()),
           " does not broadcast to the scores' shape ", shape_str(scores), " ([..., L, S])");
  return mask.detach().expand(scores);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options, Generator* generator) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::scaled_dot_product_attention, query, key, value,
                                           options.attn_mask)) {
    AttentionOptions cast_options = options;
    cast_options.attn_mask = (*cast)[3];
    return scaled_dot_product_attention((*cast)[0], (*cast)[1], (*cast)[2], cast_options, generator);
  }
  const Shape batch = common_batch(query, key, value);
  SG_CHECK(is_floating(query.dtype()) && key.dtype() == query.dtype() && value.dtype() == query.dtype(), kName,
           ": query, key and value must share one floating dtype, got ", query.dtype(), ", ", key.dtype(), " and ",
           value.dtype());
  SG_CHECK(key.device() == query.device() && value.device() == query.device(), kName,
           ": query, key and value must be on one device, got ", query.device(), ", ", key.device(), " and ",
           value.device());
  SG_CHECK(options.dropout_p >= 0 && options.dropout_p <= 1, kName, ": dropout_p must be in [0, 1], got ",
           options.dropout_p);
  const int64_t L = query.size(-2), S = key.size(-2), E = query.size(-1), Ev = value.size(-1);

  AttentionArgs args;
  args.mask = kernel_mask(options, query, with_matrix(batch, L, S));
  args.causal = options.is_causal;
  args.scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  args.dropout_p = options.dropout_p;
  if (args.dropout_p > 0) {  // four probabilities per Philox block
    Generator& random = generator != nullptr ? *generator : default_generator();
    args.seed = random.seed();
    args.first_block = random.reserve(static_cast<uint64_t>((numel_of(batch) * L * S + 3) / 4));
  }
  const TensorOptions math_options{query.dtype() == DType::f64 ? DType::f64 : DType::f32, query.device()};
  const Tensor qe = kernel_operand(query, batch);
  Tensor out = empty_in_layout_of(with_matrix(batch, L, Ev), qe, {query.dtype(), query.device()});
  Shape rows = batch;
  rows.push_back(L);
  const Tensor log_sum_exp = empty(rows, math_options);  // [batch..., L]: all the backward keeps per row
  // On the CPU, dropout's decisions as bits, which the backward reads instead of drawing them again;
  // the CUDA kernel draws them again (core/kernels/attention.h).
  Tensor dropout_keep;
  if (args.dropout_p > 0 && query.device().is_cpu())
    dropout_keep = empty(with_matrix(batch, L, attention_dropout_words(S)), {DType::i64});
  kernels::attention_forward(out, log_sum_exp, dropout_keep, qe, kernel_operand(key, batch),
                             kernel_operand(value, batch), args);
  // With P = softmax(scores), Z = dropout(P), out = Z v and delta_i = dout_i . out_i:
  // dv = Z^T dout, dscores = P * (dropout(dout v^T) - delta), dq = scale dscores k, dk = scale dscores^T q
  return record(
      "ScaledDotProductAttentionBackward", out, {query, key, value},
      [sq = SavedTensor(query), sk = SavedTensor(key), sv = SavedTensor(value), so = SavedTensor(out),
       smask = SavedTensor(args.mask), log_sum_exp, dropout_keep, args, batch](const Tensor& g, const NeedsGrad&) {
        const Tensor q = sq.get(), k = sk.get(), v = sv.get();
        AttentionArgs checked = args;
        checked.mask = smask.get();  // throws if the mask was modified in place since the forward
        const Tensor qe = kernel_operand(q, batch), ke = kernel_operand(k, batch), ve = kernel_operand(v, batch);
        const TensorOptions options{q.dtype(), q.device()};
        Tensor grad_q = empty_in_layout_of(qe.sizes(), qe, options),
               grad_k = empty_in_layout_of(ke.sizes(), ke, options),
               grad_v = empty_in_layout_of(ve.sizes(), ve, options);
        kernels::attention_backward(grad_q, grad_k, grad_v, kernel_operand(g.to(q.dtype()), batch), qe, ke, ve,
                                    so.get(), log_sum_exp, dropout_keep, checked);
        return TensorList{autograd::sum_to(grad_q, q.sizes()), autograd::sum_to(grad_k, k.sizes()),
                          autograd::sum_to(grad_v, v.sizes())};
      });
}

Tensor attention_dropout_mask(const Shape& shape, double dropout_p, uint64_t seed, uint64_t first_block) {
  SG_CHECK(shape.size() >= 2, "attention_dropout_mask: expected a shape [batch..., L, S], got ", shape_str(shape));
  AttentionArgs args;
  args.dropout_p = dropout_p;
  args.seed = seed;
  args.first_block = first_block;
  Tensor keep = empty(shape, {DType::boolean});
  kernels::attention_dropout_keep(keep, args);
  return keep;
}

}  // namespace sg
