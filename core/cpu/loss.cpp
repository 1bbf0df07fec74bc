// CPU cross-entropy (and NLL), forward and backward: every row of C scores is read in place
// (a strided row when the input has positions after the class dim), its log-softmax is never
// materialised, and the backward writes softmax-minus-target in one pass.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/lane_sum.h"
#include "core/cpu/loss_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

// A contiguous [N, C, D] input: row r = n * D + d holds C elements, `stride` apart.
struct ClassRows {
  int64_t rows = 0, C = 0, D = 1;
  int64_t first(int64_t row) const { return (row / D) * C * D + row % D; }
  int64_t stride() const { return D; }
};

ClassRows class_rows(const Shape& input_shape) {
  ClassRows layout{input_shape[0], input_shape[1], 1};
  for (size_t d = 2; d < input_shape.size(); ++d) layout.D *= input_shape[d];
  layout.rows *= layout.D;
  return layout;
}

// The class weights as doubles (all 1 when the weight tensor is undefined).
class ClassWeights {
public:
  ClassWeights(const Tensor& weight, int64_t C) : C_(C) {
    if (!weight.defined()) return;
    const Tensor w = kernels::contiguous(weight);
    values_.resize(C);
    SG_DISPATCH_FLOATING(w.dtype(), "cross_entropy", [&]<typename scalar_t>() {
      const scalar_t* data = w.data_ptr<scalar_t>();
      for (int64_t c = 0; c < C; ++c) values_[c] = static_cast<double>(static_cast<opmath_t<scalar_t>>(data[c]));
    });
  }
  double operator()(int64_t c) const { return values_.empty() ? 1.0 : values_[c]; }
  double mean() const {
    if (values_.empty()) return 1.0;
    double total = 0;
    for (double w : values_) total += w;
    return total / static_cast<double>(C_);
  }

private:
  int64_t C_;
  std::vector<double> values_;
};

// Checks every row's target and returns the total weight of the rows that count. Runs before any
// parallel work, so a bad target throws from the calling thread.
double check_targets(const int64_t* targets, int64_t rows, int64_t C, const ClassWeights& weight_of,
                     const kernels::CrossEntropyArgs& args) {
  double total_weight = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[r];
    if (t == args.ignore_index) continue;
    SG_CHECK(t >= 0 && t < C, class_loss_name(args.scores), ": target ", t, " is out of range for ", C,
             " classes (expected a value in [0, ", C, ") or ignore_index ", args.ignore_index, ")");
    total_weight += weight_of(t);
  }
  return total_weight;
}

int64_t row_grain(int64_t C) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C)); }

}  // namespace

void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const kernels::CrossEntropyArgs& args) {
  const Tensor x = kernels::contiguous(input), t = kernels::contiguous(target);
  const ClassRows layout = class_rows(x.sizes());
  const int64_t C = layout.C;
  const int64_t* targets = t.data_ptr<int64_t>();
  const ClassWeights weight_of(args.weight, C);
  const double total = check_targets(targets, layout.rows, C, weight_of, args);
  total_weight.data_ptr<double>()[0] = total;
  const bool logits = args.scores == ClassScores::logits;
  const double smoothing = args.label_smoothing;

  std::vector<double> losses(layout.rows);
  SG_DISPATCH_FLOATING(x.dtype(), class_loss_name(args.scores), [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = x.data_ptr<scalar_t>();
    double* lse_data = logits ? log_sum_exp.data_ptr<double>() : nullptr;
    parallel_for(layout.rows, row_grain(C), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t target_class = targets[r];
        if (target_class == args.ignore_index) {
          losses[r] = 0;
          if (logits) lse_data[r] = 0;
          continue;
        }
        const scalar_t* row = x_data + layout.first(r);
        const int64_t step = layout.stride();
        auto score = [&](int64_t c) { return static_cast<math_t>(row[c * step]); };
        // log-probability of class c = score - shift (shift = logsumexp for logits, 0 for log-probs)
        double shift = 0;
        if (logits) {
          math_t max = -std::numeric_limits<math_t>::infinity();
          for (int64_t c = 0; c < C; ++c) max = std::max(max, score(c));
          const double sum = lane_sum(C, [&](int64_t c) { return static_cast<double>(std::exp(score(c) - max)); });
          shift = static_cast<double>(max) + std::log(sum);
          lse_data[r] = shift;
        }
        double loss = -(1 - smoothing) * weight_of(target_class) * (static_cast<double>(score(target_class)) - shift);
        if (smoothing > 0) {
          const double weighted =
              lane_sum(C, [&](int64_t c) { return weight_of(c) * (static_cast<double>(score(c)) - shift); });
          loss -= smoothing / static_cast<double>(C) * weighted;
        }
        losses[r] = loss;
      }
    });
    scalar_t* out_data = out.data_ptr<scalar_t>();
    if (args.reduction == Reduction::none) {
      for (int64_t r = 0; r < layout.rows; ++r) out_data[r] = static_cast<scalar_t>(static_cast<math_t>(losses[r]));
    } else {
      double sum = 0;  // in row order: the same bits for any thread count
      for (double loss : losses) sum += loss;
      out_data[0] = static_cast<scalar_t>(static_cast<math_t>(args.reduction == Reduction::mean ? sum / total : sum));
    }
  });
}

void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const kernels::CrossEntropyArgs& args) {
  const bool logits = args.scores == ClassScores::logits;
  const Tensor x = logits ? kernels::contiguous(input) : Tensor();
  const Tensor t = kernels::contiguous(target), g = kernels::contiguous(grad_output);
  const ClassRows layout = class_rows(grad_input.sizes());
  const int64_t C = layout.C;
  const int64_t* targets = t.data_ptr<int64_t>();
  const ClassWeights weight_of(args.weight, C);
  const double mean_weight = weight_of.mean();
  const double smoothing = args.label_smoothing;
  const double reduction_scale = args.reduction == Reduction::mean ? 1.0 / total_weight.data_ptr<double>()[0] : 1.0;

  SG_DISPATCH_FLOATING(grad_input.dtype(), class_loss_name(args.scores), [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = logits ? x.data_ptr<scalar_t>() : nullptr;
    const scalar_t* g_data = g.data_ptr<scalar_t>();
    const double* lse_data = logits ? log_sum_exp.data_ptr<double>() : nullptr;
    scalar_t* grad_data = grad_input.data_ptr<scalar_t>();
    parallel_for(layout.rows, row_grain(C), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t first = layout.first(r);
        const int64_t step = layout.stride();
        const int64_t target_class = targets[r];
        if (target_class == args.ignore_index) {
          for (int64_t c = 0; c < C; ++c) grad_data[first + c * step] = scalar_t(0);
          continue;
        }
        const double scale =
            static_cast<double>(static_cast<math_t>(g_data[args.reduction == Reduction::none ? r : 0])) *
            reduction_scale;
        // d loss / d logp_c = -q_c; through log_softmax, d loss / d x_c = softmax_c * sum(q) - q_c,
        // where sum(q) = (1 - s) * w_t + s * mean(w).
        const double mass = (1 - smoothing) * weight_of(target_class) + smoothing * mean_weight;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = first + c * step;
          double q = smoothing / static_cast<double>(C) * weight_of(c);
          if (c == target_class) q += (1 - smoothing) * weight_of(target_class);
          double softmax = 0;
          if (logits) {  // exp(log-probability), the exp in the input's compute type as in the forward
            const double log_prob = static_cast<double>(static_cast<math_t>(x_data[i])) - lse_data[r];
            softmax = static_cast<double>(std::exp(static_cast<math_t>(log_prob)));
          }
          grad_data[i] = static_cast<scalar_t>(static_cast<math_t>(scale * (softmax * mass - q)));
        }
      }
    });
  });
}

}  // namespace sg::cpu
