#include "dist/sync_batchnorm.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_norm.h"
#include "core/factory.h"
#include "core/kernels/norm.h"
#include "dist/dist.h"
#include "nn/batchnorm.h"

namespace sg::dist {

namespace {

// Every dim but the channel dim 1: what the statistics reduce over.
Shape reduced_dims(const Tensor& input) {
  Shape dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// [C] viewed so that it broadcasts against [N, C, ...].
Tensor per_channel(const Tensor& t, const Tensor& input) {
  Shape shape(input.dim(), 1);
  shape[1] = input.size(1);
  return t.view(shape);
}

struct GlobalStatistics {
  Tensor mean, biased_var;  // [C], f64
  int64_t count = 0;        // values per channel over all ranks
};

GlobalStatistics gather_statistics(const Tensor& input, ProcessGroup& group) {
  const int64_t channels = input.size(1);
  const int64_t count = input.numel() / channels;
  // This rank's [count, mean (C), M2 (C)] — M2 the sum of squared deviations from its mean.
  Tensor local = zeros({1 + 2 * channels}, {DType::f64, group.device()});
  local.narrow(0, 0, 1).fill_(static_cast<double>(count));
  if (count > 0) {
    const Tensor x = input.to(DType::f64);
    const Tensor mean = x.mean(reduced_dims(x));
    local.narrow(0, 1, channels).copy_(mean);
    local.narrow(0, 1 + channels, channels).copy_((x - per_channel(mean, x)).pow(2.0).sum(reduced_dims(x)));
  }
  std::vector<Tensor> all;
  for (int r = 0; r < group.size(); ++r) all.push_back(empty({1 + 2 * channels}, {DType::f64, group.device()}));
  group.all_gather(all, local)->wait();

  // Chan et al.: merging (n_a, mean_a, M2_a) with (n_b, mean_b, M2_b) gives
  // n = n_a + n_b, mean = mean_a + (mean_b - mean_a) n_b / n, M2 = M2_a + M2_b + (mean_b - mean_a)^2 n_a n_b / n.
  GlobalStatistics stats{zeros({channels}, {DType::f64}), zeros({channels}, {DType::f64}), 0};
  double* mean = stats.mean.data_ptr<double>();
  double* m2 = stats.biased_var.data_ptr<double>();
  for (const Tensor& rank_stats : all) {
    const Tensor on_host = rank_stats.to(Device::cpu());  // a few numbers per channel: merged on the host
    const double* s = on_host.data_ptr<double>();
    const int64_t n_b = static_cast<int64_t>(s[0]);
    if (n_b == 0) continue;
    const int64_t n = stats.count + n_b;
    for (int64_t c = 0; c < channels; ++c) {
      const double delta = s[1 + c] - mean[c];
      mean[c] += delta * static_cast<double>(n_b) / static_cast<double>(n);
      m2[c] += s[1 + channels + c] +
               delta * delta * static_cast<double>(stats.count) * static_cast<double>(n_b) / static_cast<double>(n);
    }
    stats.count = n;
  }
  SG_CHECK(stats.count > 1, "SyncBatchNorm: expected more than 1 value per channel over all ranks when training, got ",
           stats.count, " (input of shape ", shape_str(input.sizes()), " on rank ", group.rank(), ")");
  stats.biased_var.div_(static_cast<double>(stats.count));  // M2 / n
  stats.mean = stats.mean.to(input.device());
  stats.biased_var = stats.biased_var.to(input.device());
  return stats;
}

}  // namespace

Tensor sync_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, double momentum, double eps, ProcessGroup& group) {
  SG_CHECK(is_floating(input.dtype()) && input.dim() >= 2,
           "SyncBatchNorm: expected a floating input of shape [N, C, ...], got ", input.dtype(), " ",
           shape_str(input.sizes()));
  GlobalStatistics stats;
  {
    NoGradGuard no_grad;
    stats = gather_statistics(input.detach(), group);
    if (running_mean.defined()) {
      const double n = static_cast<double>(stats.count);
      Tensor(running_mean).mul_(1.0 - momentum).add_(stats.mean.to(running_mean.dtype()), momentum);
      Tensor(running_var).mul_(1.0 - momentum).add_(stats.biased_var.to(running_var.dtype()), momentum * n / (n - 1));
    }
  }
  // Normalising with given statistics is batch_norm's evaluation path: pass the global mean and
  // variance where it expects the running ones (the kernel leaves them untouched then).
  const Tensor mean = stats.mean.to(input.dtype()), var = stats.biased_var.to(input.dtype());
  Tensor out = empty(input.sizes(), {input.dtype(), input.device()});
  const DType statistics_dtype = input.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor saved_mean = empty({input.size(1)}, {statistics_dtype, input.device()});
  const Tensor invstd = empty({input.size(1)}, {statistics_dtype, input.device()});
  kernels::batch_norm(out, saved_mean, invstd, input.contiguous(), {weight, bias, mean, var, false, momentum, eps});

  // With xhat = (x - mean) * invstd and sums over every rank's batch of `count` values:
  // dx = invstd * w * (dy - sum(dy) / count - xhat * sum(dy * xhat) / count); dw, db local.
  return autograd::record(
      "SyncBatchNormBackward", out, {input, weight, bias},
      [sx = autograd::SavedTensor(input), sw = autograd::SavedTensor(weight), saved_mean, invstd, count = stats.count,
       &group](const Tensor& g, const autograd::NeedsGrad& needs) {
        const Tensor x = sx.get().contiguous(), w = sw.get();
        const int64_t channels = x.size(1);
        const Tensor dy = g.to(x.dtype()).contiguous();
        // The evaluation-mode kernel gives dw = sum(dy * xhat), db = sum(dy) and invstd * w * dy.
        Tensor grad_input = empty(x.sizes(), {x.dtype(), x.device()});
        Tensor grad_weight = empty({channels}, {x.dtype(), x.device()});
        Tensor grad_bias = empty({channels}, {x.dtype(), x.device()});
        kernels::batch_norm_backward(needs[0] ? grad_input : Tensor(), grad_weight, grad_bias, dy, x, w, saved_mean,
                                     invstd, false);
        if (needs[0]) {
          Tensor sums = empty({2 * channels}, {x.dtype(), x.device()});
          sums.narrow(0, 0, channels).copy_(grad_bias);
          sums.narrow(0, channels, channels).copy_(grad_weight);
          group.all_reduce(sums, ReduceOp::SUM)->wait();
          const Tensor mean_dy = sums.narrow(0, 0, channels) / static_cast<double>(count);
          const Tensor mean_dy_xhat = sums.narrow(0, channels, channels) / static_cast<double>(count);
          const Tensor scale = w.defined() ? invstd.to(x.dtype()) * w : invstd.to(x.dtype());
          const Tensor xhat = (x - per_channel(saved_mean.to(x.dtype()), x)) * per_channel(invstd.to(x.dtype()), x);
          grad_input.sub_(per_channel(scale, x) * (per_channel(mean_dy, x) + xhat * per_channel(mean_dy_xhat, x)));
        }
        return TensorList{needs[0] ? grad_input : Tensor(), needs[1] ? grad_weight : Tensor(),
                          needs[2] ? grad_bias : Tensor()};
      });
}

int convert_sync_batchnorm(nn::Module& module, ProcessGroup* group) {
  int converted = 0;
  for (const auto& [name, child] : module.named_modules()) {
    auto* bn = dynamic_cast<nn::BatchNormBase*>(child.get());
    if (bn == nullptr) continue;
    // Raw pointer: the function lives inside the module it points to. Only training
    // synchronises, as in PyTorch: an evaluation forward (which comes here only without running
    // statistics) normalises with its own batch and needs no process group at all.
    bn->batch_statistics_forward = [bn, group](const Tensor& input, double momentum) {
      // None while a checkpointed segment is recomputed (Note [BatchNorm under activation checkpointing]).
      const Tensor running_mean = bn->updates_running_stats() ? bn->running_mean : Tensor();
      const Tensor running_var = bn->updates_running_stats() ? bn->running_var : Tensor();
      if (bn->is_training()) {
        ProcessGroup* statistics_group = group ? group : (is_initialized() ? &default_group() : nullptr);
        if (statistics_group != nullptr && statistics_group->size() > 1)
          return sync_batch_norm(input, bn->weight, bn->bias, running_mean, running_var, momentum, bn->eps,
                                 *statistics_group);
      }
      return batch_norm(input, bn->weight, bn->bias, running_mean, running_var, true, momentum, bn->eps);
    };
    ++converted;
  }
  return converted;
}

}  // namespace sg::dist
