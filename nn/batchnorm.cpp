#include "nn/batchnorm.h"

#include <sstream>

#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_norm.h"
#include "core/factory.h"
#include "nn/init.h"

namespace sg::nn {

BatchNormBase::BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                             bool track_running_stats)
    : num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats) {
  SG_CHECK(num_features > 0, "BatchNorm: num_features must be positive, got ", num_features);
  if (affine) {
    weight = register_parameter("weight", empty({num_features}));
    bias = register_parameter("bias", empty({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", empty({num_features}));
    running_var = register_buffer("running_var", empty({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {DType::i64}));
  }
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (!affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

void BatchNormBase::check_channels(const Tensor& input) const {
  SG_CHECK(input.size(1) == num_features, type_name(), ": expected ", num_features,
           " channels (dim 1) in the input, got shape ", shape_str(input.sizes()));
}

bool BatchNormBase::updates_running_stats() const {
  return is_training() && track_running_stats && !autograd::is_checkpoint_recomputation();
}

Tensor BatchNormBase::forward(const Tensor& input) {
  check_input(input);
  double factor = momentum.value_or(0.0);
  if (updates_running_stats()) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1.0);
    if (!momentum) factor = 1.0 / num_batches_tracked.item<double>();  // the cumulative average
  }
  // Batch statistics in training, and in eval when there are no running ones.
  const bool use_batch_statistics = is_training() || !track_running_stats;
  if (use_batch_statistics && batch_statistics_forward) return batch_statistics_forward(input, factor);
  // batch_norm moves the running statistics it is given when it normalises with the batch's, so a
  // forward that must not move them passes none.
  const bool pass_running = !use_batch_statistics || updates_running_stats();
  return batch_norm(input, weight, bias, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(),
                    use_batch_statistics, factor, eps);
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream out;
  out << num_features << ", eps=" << eps << ", momentum=";
  if (momentum) out << *momentum;
  else out << "None";
  out << ", affine=" << (affine ? "True" : "False")
      << ", track_running_stats=" << (track_running_stats ? "True" : "False");
  return out.str();
}

void BatchNorm1d::check_input(const Tensor& input) const {
  SG_CHECK(input.dim() == 2 || input.dim() == 3, "BatchNorm1d: expected an input of shape [N, C] or [N, C, L], got ",
           shape_str(input.sizes()));
  check_channels(input);
}

void BatchNorm2d::check_input(const Tensor& input) const {
  SG_CHECK(input.dim() == 4, "BatchNorm2d: expected an input of shape [N, C, H, W], got ", shape_str(input.sizes()));
  check_channels(input);
}

}  // namespace sg::nn
