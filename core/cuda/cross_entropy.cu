// CUDA cross-entropy (and NLL), forward and backward, with the CPU kernel's contract
// (core/kernels/loss.h): shape letters N, C, D; row r = n * D + d holds the C scores at
// (n * C + c) * D + d. Sums run in double as on the CPU, each in a fixed order (Note
// [Deterministic GPU row reductions]): the results are the same on every run.
//
// The forward checks every target first and throws, before any loss is computed, when one is out
// of range; that check waits for the GPU (the one host round trip of this op).
#include <cmath>
#include <limits>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/loss_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"

namespace sg::cuda {

namespace {

constexpr int kSingleBlockThreads = 1024;  // the one-block reductions over rows or classes
constexpr int64_t kNoRow = std::numeric_limits<int64_t>::max();

template <typename scalar_t>
__device__ double widen(scalar_t value) {
  return static_cast<double>(static_cast<opmath_t<scalar_t>>(value));
}

// Class weight c as a double, 1 when there are no weights.
template <typename scalar_t>
__device__ double weight_of(const scalar_t* weight, int64_t c) {
  return weight != nullptr ? widen(weight[c]) : 1.0;
}

// The total weight of the counted rows, and the first row whose target is out of range.
struct TargetCheck {
  double total_weight;
  int64_t bad_row;
};
struct CombineChecks {
  __device__ TargetCheck operator()(const TargetCheck& a, const TargetCheck& b) const {
    return {a.total_weight + b.total_weight, a.bad_row < b.bad_row ? a.bad_row : b.bad_row};
  }
};

// One block: total_weight[0] = the sum of w_t over rows not ignored; status = {first bad row (or
// kNoRow), its target}.
template <typename scalar_t>
__global__ void check_targets_kernel(const int64_t* targets, int64_t rows, int64_t C, int64_t ignore_index,
                                     const scalar_t* weight, double* total_weight, int64_t* status) {
  const TargetCheck check = RowThreads<true>{}.fold(
      rows, TargetCheck{0.0, kNoRow},
      [&](int64_t r) {
        const int64_t t = targets[r];
        if (t == ignore_index) return TargetCheck{0.0, kNoRow};
        if (t < 0 || t >= C) return TargetCheck{0.0, r};
        return TargetCheck{weight_of(weight, t), kNoRow};
      },
      CombineChecks{});
  if (threadIdx.x != 0) return;
  total_weight[0] = check.total_weight;
  status[0] = check.bad_row;
  status[1] = check.bad_row == kNoRow ? 0 : targets[check.bad_row];
}

// The loss of each row (the CPU's formula, core/kernels/loss.h): written to `out` for
// Reduction::none, else to `losses` for the sum that follows.
template <typename scalar_t>
struct CrossEntropyRows {
  using math_t = opmath_t<scalar_t>;
  const scalar_t* x;
  const int64_t* targets;
  const scalar_t* weight;  // may be null
  double* log_sum_exp;     // null for log-probabilities
  scalar_t* out;           // Reduction::none, else null
  double* losses;          // sum and mean, else null
  int64_t C, D, ignore_index;
  double smoothing;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const int64_t target = targets[r];
    double loss = 0;
    double shift = 0;              // log-probability of class c = score - shift (logsumexp for logits, 0 for log-probs)
    if (target != ignore_index) {  // the same branch for every thread of a row
      const scalar_t* scores = x + (r / D) * C * D + r % D;
      auto score = [&](int64_t c) { return static_cast<math_t>(scores[c * D]); };
      if (log_sum_exp != nullptr) {
        const math_t max = threads.fold(C, static_cast<math_t>(-INFINITY), score, Max{});
        const double sum = threads.fold(
            C, 0.0, [&](int64_t c) { return static_cast<double>(std::exp(score(c) - max)); }, Plus{});
        shift = static_cast<double>(max) + std::log(sum);
      }
      loss = -(1 - smoothing) * weight_of(weight, target) * (static_cast<double>(score(target)) - shift);
      if (smoothing > 0) {
        const double weighted = threads.fold(
            C, 0.0, [&](int64_t c) { return weight_of(weight, c) * (static_cast<double>(score(c)) - shift); }, Plus{});
        loss -= smoothing / static_cast<double>(C) * weighted;
      }
    }
    if (!threads.leader()) return;
    if (log_sum_exp != nullptr) log_sum_exp[r] = shift;
    if (out != nullptr) out[r] = static_cast<scalar_t>(static_cast<math_t>(loss));
    if (losses != nullptr) losses[r] = loss;
  }
};

// One block: out[0] = the sum of the row losses, divided by total_weight for the mean.
template <typename scalar_t>
__global__ void reduce_losses_kernel(const double* losses, int64_t rows, const double* total_weight, bool mean,
                                     scalar_t* out) {
  const double sum = RowThreads<true>{}.fold(
      rows, 0.0, [&](int64_t r) { return losses[r]; }, Plus{});
  if (threadIdx.x == 0)
    out[0] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(mean ? sum / total_weight[0] : sum));
}

// One block: the mean class weight (the smoothed targets' share in the backward).
template <typename scalar_t>
__global__ void mean_weight_kernel(const scalar_t* weight, int64_t C, double* mean_weight) {
  const double sum = RowThreads<true>{}.fold(
      C, 0.0, [&](int64_t c) { return widen(weight[c]); }, Plus{});
  if (threadIdx.x == 0) mean_weight[0] = sum / static_cast<double>(C);
}

// grad_input element i = scale * (softmax * sum(q) - q) (logits) or -scale * q (log-probabilities),
// 0 on ignored rows; see cpu::cross_entropy_backward.
template <typename scalar_t>
struct BackwardArgs {
  const scalar_t* x;          // logits only, else null
  const double* log_sum_exp;  // logits only, else null
  const int64_t* targets;
  const scalar_t* weight;       // may be null
  const double* mean_weight;    // null when there are no weights (then 1)
  const scalar_t* grad_output;  // one per row (none) or one
  const double* total_weight;   // read for the mean
  scalar_t* grad_input;
  int64_t numel, C, D, ignore_index;
  double smoothing;
  Reduction reduction;
};

template <typename scalar_t>
__global__ void cross_entropy_backward_kernel(BackwardArgs<scalar_t> a) {
  using math_t = opmath_t<scalar_t>;
  for (int64_t i = grid_first(); i < a.numel; i += grid_step()) {
    const int64_t d = i % a.D, c = (i / a.D) % a.C, r = (i / (a.C * a.D)) * a.D + d;
    const int64_t target = a.targets[r];
    if (target == a.ignore_index) {
      a.grad_input[i] = scalar_t(0);
      continue;
    }
    const double reduction_scale = a.reduction == Reduction::mean ? 1.0 / a.total_weight[0] : 1.0;
    const double scale = widen(a.grad_output[a.reduction == Reduction::none ? r : 0]) * reduction_scale;
    const double mean_weight = a.mean_weight != nullptr ? a.mean_weight[0] : 1.0;
    const double mass = (1 - a.smoothing) * weight_of(a.weight, target) + a.smoothing * mean_weight;
    double q = a.smoothing / static_cast<double>(a.C) * weight_of(a.weight, c);
    if (c == target) q += (1 - a.smoothing) * weight_of(a.weight, target);
    double softmax = 0;
    if (a.x != nullptr) {  // exp(log-probability), the exp in the input's compute type as in the forward
      const double log_prob = widen(a.x[i]) - a.log_sum_exp[r];
      softmax = static_cast<double>(std::exp(static_cast<math_t>(log_prob)));
    }
    a.grad_input[i] = static_cast<scalar_t>(static_cast<math_t>(scale * (softmax * mass - q)));
  }
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// Rows as [N, C, D] of a contiguous input.
struct ClassLayout {
  int64_t rows, C, D;
};
ClassLayout class_layout(const Shape& input_shape) {
  ClassLayout layout{input_shape[0], input_shape[1], 1};
  for (size_t d = 2; d < input_shape.size(); ++d) layout.D *= input_shape[d];
  layout.rows *= layout.D;
  return layout;
}

template <typename scalar_t>
void cross_entropy_typed(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& x,
                         const Tensor& targets, const Tensor& weight, const kernels::CrossEntropyArgs& args) {
  const ClassLayout layout = class_layout(x.sizes());
  const int64_t* target_data = data_or_null<const int64_t>(targets);
  const scalar_t* weight_data = data_or_null<const scalar_t>(weight);
  double* total_weight_data = data_or_null<double>(total_weight);

  const Tensor status = empty({2}, {DType::i64, x.device()});
  check_targets_kernel<scalar_t>
      <<<1, kSingleBlockThreads, 0, compute_stream()>>>(target_data, layout.rows, layout.C, args.ignore_index,
                                                        weight_data, total_weight_data, data_or_null<int64_t>(status));
  SG_CUDA_CHECK_LAUNCH();
  const Tensor status_on_host = status.to(Device::cpu());  // waits for the check
  const int64_t* found = status_on_host.data_ptr<int64_t>();
  SG_CHECK(found[0] == kNoRow, class_loss_name(args.scores), ": target ", found[1], " is out of range for ", layout.C,
           " classes (expected a value in [0, ", layout.C, ") or ignore_index ", args.ignore_index, ")");

  const bool none = args.reduction == Reduction::none;
  const Tensor losses = none ? Tensor() : empty({layout.rows}, {DType::f64, x.device()});
  const bool block_per_row = layout.D == 1 && layout.C >= kWarpSize;
  launch_rows(
      layout.rows, layout.C, block_per_row,
      CrossEntropyRows<scalar_t>{data_or_null<const scalar_t>(x), target_data, weight_data,
                                 args.scores == ClassScores::logits ? data_or_null<double>(log_sum_exp) : nullptr,
                                 none ? data_or_null<scalar_t>(out) : nullptr, data_or_null<double>(losses), layout.C,
                                 layout.D, args.ignore_index, args.label_smoothing});
  if (none) return;
  reduce_losses_kernel<scalar_t><<<1, kSingleBlockThreads, 0, compute_stream()>>>(
      data_or_null<const double>(losses), layout.rows, total_weight_data, args.reduction == Reduction::mean,
      data_or_null<scalar_t>(out));
  SG_CUDA_CHECK_LAUNCH();
}

template <typename scalar_t>
void cross_entropy_backward_typed(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                                  const Tensor& total_weight, const Tensor& x, const Tensor& targets,
                                  const Tensor& weight, const kernels::CrossEntropyArgs& args) {
  const ClassLayout layout = class_layout(grad_input.sizes());
  const bool logits = args.scores == ClassScores::logits;
  Tensor mean_weight;
  if (weight.defined()) {
    mean_weight = empty({}, {DType::f64, grad_input.device()});
    mean_weight_kernel<scalar_t><<<1, kSingleBlockThreads, 0, compute_stream()>>>(
        data_or_null<const scalar_t>(weight), layout.C, data_or_null<double>(mean_weight));
    SG_CUDA_CHECK_LAUNCH();
  }
  const int64_t numel = grad_input.numel();
  if (numel == 0) return;
  const BackwardArgs<scalar_t> backward{logits ? data_or_null<const scalar_t>(x) : nullptr,
                                        logits ? data_or_null<const double>(log_sum_exp) : nullptr,
                                        data_or_null<const int64_t>(targets),
                                        data_or_null<const scalar_t>(weight),
                                        data_or_null<const double>(mean_weight),
                                        data_or_null<const scalar_t>(grad_output),
                                        data_or_null<const double>(total_weight),
                                        data_or_null<scalar_t>(grad_input),
                                        numel,
                                        layout.C,
                                        layout.D,
                                        args.ignore_index,
                                        args.label_smoothing,
                                        args.reduction};
  cross_entropy_backward_kernel<scalar_t><<<grid_for(numel), kBlockThreads, 0, compute_stream()>>>(backward);
  SG_CUDA_CHECK_LAUNCH();
}

Tensor optional_contiguous(const Tensor& t) { return t.defined() ? kernels::contiguous(t) : Tensor(); }

}  // namespace

void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const kernels::CrossEntropyArgs& args) {
  const DeviceGuard guard(input.device().index);
  // Strided operands become contiguous device copies (kernels::copy), as on the CPU.
  const Tensor x = kernels::contiguous(input), t = kernels::contiguous(target), w = optional_contiguous(args.weight);
  SG_DISPATCH_FLOATING(x.dtype(), class_loss_name(args.scores), [&]<typename scalar_t>() {
    cross_entropy_typed<scalar_t>(out, log_sum_exp, total_weight, x, t, w, args);
  });
}

void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const kernels::CrossEntropyArgs& args) {
  const DeviceGuard guard(grad_input.device().index);
  const bool logits = args.scores == ClassScores::logits;
  const Tensor x = logits ? kernels::contiguous(input) : Tensor();
  const Tensor t = kernels::contiguous(target), g = kernels::contiguous(grad_output);
  const Tensor w = optional_contiguous(args.weight);
  SG_DISPATCH_FLOATING(grad_input.dtype(), class_loss_name(args.scores), [&]<typename scalar_t>() {
    cross_entropy_backward_typed<scalar_t>(grad_input, g, log_sum_exp, total_weight, x, t, w, args);
  });
}

}  // namespace sg::cuda
