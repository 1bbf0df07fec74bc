#pragma once
// defines: CastPolicy, AutocastOp, AutocastRule, kAutocastRules, autocast_rule, autocast — which
//          ops autocast changes, to what, and the helper the op fronts call.
//
// Note [Autocast policy]
// Inside an autocast region (amp::AutocastGuard) an op is one of three kinds, following
// torch.autocast's op lists:
//   lower_precision  products (matmul, linear, conv2d, ...): f32/f16/bf16 inputs are cast to the
//                    region's dtype, so the output is low precision too. The kernels accumulate
//                    in f32 and round the result once, as a GPU's tensor cores do.
//   fp32             ops whose result loses too much in 16 bits (exp/log/pow can overflow, sums and
//                    norms lose small terms, the losses feed the whole backward): 16-bit inputs are
//                    cast up to f32 and the output is f32.
//   promote          ops with several inputs run in the widest of their dtypes (f16 + f32 -> f32).
//                    Most do so with or without a region (promote_types); scatter_add casts here.
// Every other op runs in the dtype of its input. f64 and integer tensors are never cast. The table
// below is the whole policy; docs/amp.md shows the same table and tests/test_amp.cpp checks that
// the two agree and that every op behaves as its row says.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "autograd/autocast_state.h"
#include "core/tensor.h"

namespace sg::autograd {

enum class CastPolicy { lower_precision, fp32, promote };
std::string_view cast_policy_name(CastPolicy policy);  // "lower_precision", "fp32", "promote"

enum class AutocastOp {
  matmul,
  mm,
  bmm,
  addmm,
  baddbmm,
  linear,
  conv2d,
  scaled_dot_product_attention,
  exp,
  log,
  pow,
  rsqrt,
  sum,
  mean,
  var,
  norm,
  softmax,
  log_softmax,
  logsumexp,
  layer_norm,
  batch_norm,
  cross_entropy,
  nll_loss,
  mse_loss,
  add,
  sub,
  mul,
  div,
  maximum,
  minimum,
  where,
  cat,
  stack,
  scatter_add,
};

struct AutocastRule {
  AutocastOp op;
  std::string_view name;
  CastPolicy policy;
};

inline constexpr std::array kAutocastRules{
    AutocastRule{AutocastOp::matmul, "matmul", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::mm, "mm", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::bmm, "bmm", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::addmm, "addmm", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::baddbmm, "baddbmm", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::linear, "linear", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::conv2d, "conv2d", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::scaled_dot_product_attention, "scaled_dot_product_attention", CastPolicy::lower_precision},
    AutocastRule{AutocastOp::exp, "exp", CastPolicy::fp32},
    AutocastRule{AutocastOp::log, "log", CastPolicy::fp32},
    AutocastRule{AutocastOp::pow, "pow", CastPolicy::fp32},
    AutocastRule{AutocastOp::rsqrt, "rsqrt", CastPolicy::fp32},
    AutocastRule{AutocastOp::sum, "sum", CastPolicy::fp32},
    AutocastRule{AutocastOp::mean, "mean", CastPolicy::fp32},
    AutocastRule{AutocastOp::var, "var", CastPolicy::fp32},
    AutocastRule{AutocastOp::norm, "norm", CastPolicy::fp32},
    AutocastRule{AutocastOp::softmax, "softmax", CastPolicy::fp32},
    AutocastRule{AutocastOp::log_softmax, "log_softmax", CastPolicy::fp32},
    AutocastRule{AutocastOp::logsumexp, "logsumexp", CastPolicy::fp32},
    AutocastRule{AutocastOp::layer_norm, "layer_norm", CastPolicy::fp32},
    AutocastRule{AutocastOp::batch_norm, "batch_norm", CastPolicy::fp32},
    AutocastRule{AutocastOp::cross_entropy, "cross_entropy", CastPolicy::fp32},
    AutocastRule{AutocastOp::nll_loss, "nll_loss", CastPolicy::fp32},
    AutocastRule{AutocastOp::mse_loss, "mse_loss", CastPolicy::fp32},
    AutocastRule{AutocastOp::add, "add", CastPolicy::promote},
    AutocastRule{AutocastOp::sub, "sub", CastPolicy::promote},
    AutocastRule{AutocastOp::mul, "mul", CastPolicy::promote},
    AutocastRule{AutocastOp::div, "div", CastPolicy::promote},
    AutocastRule{AutocastOp::maximum, "maximum", CastPolicy::promote},
    AutocastRule{AutocastOp::minimum, "minimum", CastPolicy::promote},
    AutocastRule{AutocastOp::where, "where", CastPolicy::promote},
    AutocastRule{AutocastOp::cat, "cat", CastPolicy::promote},
    AutocastRule{AutocastOp::stack, "stack", CastPolicy::promote},
    AutocastRule{AutocastOp::scatter_add, "scatter_add", CastPolicy::promote},
};

// The table is indexed by AutocastOp: each row sits at its op's position.
constexpr bool rules_in_enum_order() {
  for (size_t i = 0; i < kAutocastRules.size(); ++i)
    if (static_cast<size_t>(kAutocastRules[i].op) != i) return false;
  return true;
}
static_assert(rules_in_enum_order(), "kAutocastRules must list the ops in AutocastOp's order");

constexpr const AutocastRule& autocast_rule(AutocastOp op) { return kAutocastRules[static_cast<size_t>(op)]; }

// `inputs` cast as `op`'s rule says for the current region (undefined, f64 and non-floating
// inputs pass unchanged; weights go through the cache of autocast_state.h), or std::nullopt when
// no input changes.
std::optional<TensorList> autocast_inputs(AutocastOp op, const TensorList& inputs);

// What an op front calls first; the front then either runs again on the cast inputs or, when
// nothing changes (always outside a region, at the cost of one thread-local read), simply goes on:
//   if (const auto cast = autocast(AutocastOp::matmul, a, b)) return matmul((*cast)[0], (*cast)[1]);
template <typename... Inputs>
std::optional<TensorList> autocast(AutocastOp op, const Inputs&... inputs) {
  if (!autocast_state().enabled) return std::nullopt;
  return autocast_inputs(op, TensorList{inputs...});
}

}  // namespace sg::autograd
