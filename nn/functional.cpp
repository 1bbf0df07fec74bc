// The losses and dropout of nn::functional. cross_entropy and nll_loss are one fused op each
// (kernels: core/kernels/loss.h), and so is dropout (core/kernels/dropout.h); mse_loss is a short
// composition of ops.
#include "nn/functional.h"

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "core/kernels/dropout.h"
#include "core/kernels/pointwise.h"

namespace sg::nn::functional {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

// cross_entropy (logits) and nll_loss (log-probabilities) share their checks, kernels and backward.
Tensor class_loss(ClassScores scores, const Tensor& input, const Tensor& target, const Tensor& weight,
                  int64_t ignore_index, Reduction reduction, double label_smoothing) {
  const char* name = class_loss_name(scores);
  SG_CHECK(is_floating(input.dtype()), name, ": expected a floating input, got ", input.dtype());
  SG_CHECK(target.dtype() == DType::i64, name, ": expected a target of i64 class indices, got ", target.dtype());
  SG_CHECK(input.dim() >= 1, name, ": expected an input of shape [N, C, ...] or [C], got a 0-dim tensor");
  if (input.dim() == 1) {  // one sample: [C] scores and a 0-dim target
    SG_CHECK(target.dim() == 0, name, ": an input of shape ", shape_str(input.sizes()),
             " needs a 0-dim target, got shape ", shape_str(target.sizes()));
    const Tensor loss =
        class_loss(scores, input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index, reduction, label_smoothing);
    return reduction == Reduction::none ? loss.squeeze(0) : loss;
  }
  Shape expected = input.sizes();
  expected.erase(expected.begin() + 1);  // the class dim
  SG_CHECK(target.sizes() == expected, name, ": target of shape ", shape_str(target.sizes()),
           " does not match input of shape ", shape_str(input.sizes()), " (expected ", shape_str(expected), ")");
  SG_CHECK(target.device() == input.device(), name, ": target is on ", target.device(), " but input is on ",
           input.device());
  if (weight.defined()) {
    SG_CHECK(weight.sizes() == Shape{input.size(1)}, name, ": weight of shape ", shape_str(weight.sizes()),
             " does not match input of shape ", shape_str(input.sizes()), " (expected [", input.size(1), "])");
    SG_CHECK(weight.dtype() == input.dtype() && weight.device() == input.device(), name, ": weight is ", weight.dtype(),
             " on ", weight.device(), " but input is ", input.dtype(), " on ", input.device());
  }
  SG_CHECK(label_smoothing >= 0 && label_smoothing <= 1, name, ": label_smoothing must be in [0, 1], got ",
           label_smoothing);

  const kernels::CrossEntropyArgs args{scores, weight.defined() ? weight.detach() : Tensor(), ignore_index,
                                       label_smoothing, reduction};
  const bool logits = scores == ClassScores::logits;
  Tensor out = empty(reduction == Reduction::none ? target.sizes() : Shape{}, {input.dtype(), input.device()});
  const Tensor log_sum_exp = logits ? empty({target.numel()}, {DType::f64, input.device()}) : Tensor();
  const Tensor total_weight = empty({}, {DType::f64, input.device()});
  kernels::cross_entropy(out, log_sum_exp, total_weight, input, target, args);
  // With q the row's weighted, smoothed target (core/kernels/loss.h) and `scale` from the reduction:
  // d loss / d x = scale * (softmax(x) * sum(q) - q) for logits, -scale * q for log-probabilities
  return record(logits ? "CrossEntropyBackward" : "NllLossBackward", out, {input},
                [sx = logits ? SavedTensor(input) : SavedTensor(), st = SavedTensor(target), log_sum_exp, total_weight,
                 args, shape = input.sizes(),
                 options = TensorOptions{input.dtype(), input.device()}](const Tensor& g, const NeedsGrad&) {
                  Tensor grad = empty(shape, options);
                  kernels::cross_entropy_backward(grad, g.to(options.dtype), log_sum_exp, total_weight, sx.get(),
                                                  st.get(), args);
                  return TensorList{grad};
                });
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::cross_entropy, input, options.weight)) {
    CrossEntropyOptions cast_options = options;
    cast_options.weight = (*cast)[1];
    return cross_entropy((*cast)[0], target, cast_options);
  }
  return class_loss(ClassScores::logits, input, target, options.weight, options.ignore_index, options.reduction,
                    options.label_smoothing);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::nll_loss, input, options.weight)) {
    NllLossOptions cast_options = options;
    cast_options.weight = (*cast)[1];
    return nll_loss((*cast)[0], target, cast_options);
  }
  return class_loss(ClassScores::log_probabilities, input, target, options.weight, options.ignore_index,
                    options.reduction, /*label_smoothing=*/0.0);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::mse_loss, input, target))
    return mse_loss((*cast)[0], (*cast)[1], reduction);
  SG_CHECK(input.sizes() == target.sizes(), "mse_loss: input of shape ", shape_str(input.sizes()),
           " and target of shape ", shape_str(target.sizes()), " differ");
  const Tensor difference = input - target;
  const Tensor squared = difference * difference;
  if (reduction == Reduction::none) return squared;
  return reduction == Reduction::sum ? squared.sum() : squared.mean();
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  SG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return input;
  SG_CHECK(is_floating(input.dtype()), "dropout: expected a floating input, got ", input.dtype());
  // An element is kept with probability 1 - p and multiplied by 1 / (1 - p) (0 elsewhere), so the
  // expected output equals the input; p = 1 gives zeros. One pass each way, keeping one byte per
  // element for the backward (core/kernels/dropout.h): the values and draws of bernoulli_, scale,
  // multiply.
  Tensor out = empty(input.sizes(), {input.dtype(), input.device()});
  Tensor keep = empty(input.sizes(), {DType::boolean, input.device()});
  kernels::dropout(out, keep, input, p, generator != nullptr ? *generator : default_generator());
  // d/dx = keep / (1 - p)
  return record("DropoutBackward", out, {input}, [keep, p](const Tensor& g, const NeedsGrad&) {
    Tensor grad = empty(g.sizes(), {g.dtype(), g.device()});
    kernels::dropout_backward(grad, kernels::contiguous(g), keep, p);
    return TensorList{grad};
  });
}

}  // namespace sg::nn::functional
