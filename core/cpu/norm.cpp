// CPU batch norm and layer norm, forward and backward: each statistic is one or two passes over
// the data it summarises, in double, and the output is written in one more pass — no
// temporaries the size of the input.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/lane_sum.h"
#include "core/cpu/norm_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

template <typename T>
T* optional_data(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

Tensor optional_contiguous(const Tensor& t) { return t.defined() ? kernels::contiguous(t) : Tensor(); }

template <typename scalar_t>
double load(scalar_t value) {
  return static_cast<double>(static_cast<opmath_t<scalar_t>>(value));
}

// A contiguous [N, C, S] input: channel c of sample n is the run of S elements at (n * C + c) * S.
struct ChannelLayout {
  int64_t N = 1, C = 1, S = 1;
  int64_t count() const { return N * S; }  // elements per channel
  int64_t run(int64_t n, int64_t c) const { return (n * C + c) * S; }
};

ChannelLayout channel_layout(const Tensor& x) {
  ChannelLayout layout{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) layout.S *= x.size(d);
  return layout;
}

// fn(c) for every channel, channels in parallel: each is computed by one thread, so the result
// does not depend on the thread count.
template <typename F>
void for_each_channel(const ChannelLayout& layout, F fn) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, layout.count()));
  parallel_for(layout.C, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) fn(c);
  });
}

// The sum of f(i) over the element indices i of channel c.
template <typename F>
double channel_sum(const ChannelLayout& layout, int64_t c, F f) {
  double total = 0;
  for (int64_t n = 0; n < layout.N; ++n) {
    const int64_t base = layout.run(n, c);
    total += lane_sum(layout.S, [&](int64_t s) { return f(base + s); });
  }
  return total;
}

// fn(i) for the element indices i of channel c.
template <typename F>
void for_each_in_channel(const ChannelLayout& layout, int64_t c, F fn) {
  for (int64_t n = 0; n < layout.N; ++n) {
    const int64_t base = layout.run(n, c);
    for (int64_t s = 0; s < layout.S; ++s) fn(base + s);
  }
}

}  // namespace

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const kernels::BatchNormArgs& args) {
  const Tensor x = kernels::contiguous(input);
  const Tensor weight = optional_contiguous(args.weight), bias = optional_contiguous(args.bias);
  const ChannelLayout layout = channel_layout(x);
  SG_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = x.data_ptr<scalar_t>();
    scalar_t* y_data = out.data_ptr<scalar_t>();
    math_t* mean_data = mean.data_ptr<math_t>();
    math_t* invstd_data = invstd.data_ptr<math_t>();
    const scalar_t* w = optional_data<const scalar_t>(weight);
    const scalar_t* b = optional_data<const scalar_t>(bias);
    scalar_t* running_mean = optional_data<scalar_t>(args.running_mean);
    scalar_t* running_var = optional_data<scalar_t>(args.running_var);
    const double count = static_cast<double>(layout.count());
    const double momentum = args.momentum;
    for_each_channel(layout, [&](int64_t c) {
      double m = 0;
      double inv = 0;
      if (args.training) {
        m = channel_sum(layout, c, [&](int64_t i) { return load(x_data[i]); }) / count;
        const double var = channel_sum(layout, c,
                                       [&](int64_t i) {
                                         const double d = load(x_data[i]) - m;
                                         return d * d;
                                       }) /
                           count;
        inv = 1.0 / std::sqrt(var + args.eps);
        if (running_mean != nullptr) {
          // The running variance estimates the population's, so it takes the unbiased batch variance.
          running_mean[c] = static_cast<scalar_t>((1 - momentum) * load(running_mean[c]) + momentum * m);
          running_var[c] =
              static_cast<scalar_t>((1 - momentum) * load(running_var[c]) + momentum * var * count / (count - 1));
        }
      } else {
        m = load(running_mean[c]);
        inv = 1.0 / std::sqrt(load(running_var[c]) + args.eps);
      }
      mean_data[c] = static_cast<math_t>(m);
      invstd_data[c] = static_cast<math_t>(inv);
      // y = (x - m) * inv * w + b = x * scale + shift
      const double scale = inv * (w != nullptr ? load(w[c]) : 1.0);
      const auto scale_m = static_cast<math_t>(scale);
      const auto shift = static_cast<math_t>((b != nullptr ? load(b[c]) : 0.0) - m * scale);
      for_each_in_channel(layout, c, [&](int64_t i) {
        y_data[i] = static_cast<scalar_t>(static_cast<math_t>(x_data[i]) * scale_m + shift);
      });
    });
  });
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training) {
  const Tensor x = kernels::contiguous(input), dy = kernels::contiguous(grad_out);
  const Tensor w_tensor = optional_contiguous(weight);
  const ChannelLayout layout = channel_layout(x);
  SG_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = x.data_ptr<scalar_t>();
    const scalar_t* dy_data = dy.data_ptr<scalar_t>();
    const math_t* mean_data = mean.data_ptr<math_t>();
    const math_t* invstd_data = invstd.data_ptr<math_t>();
    const scalar_t* w = optional_data<const scalar_t>(w_tensor);
    scalar_t* dx_data = optional_data<scalar_t>(grad_input);
    scalar_t* dw_data = optional_data<scalar_t>(grad_weight);
    scalar_t* db_data = optional_data<scalar_t>(grad_bias);
    const double count = static_cast<double>(layout.count());
    const bool need_sums = training || dw_data != nullptr || db_data != nullptr;
    for_each_channel(layout, [&](int64_t c) {
      const double m = mean_data[c];
      const double inv = invstd_data[c];
      double sum_dy = 0;           // sum(dy)
      double sum_dy_centered = 0;  // sum(dy * (x - m))
      if (need_sums) {
        sum_dy = channel_sum(layout, c, [&](int64_t i) { return load(dy_data[i]); });
        sum_dy_centered = channel_sum(layout, c, [&](int64_t i) { return load(dy_data[i]) * (load(x_data[i]) - m); });
      }
      if (dw_data != nullptr) dw_data[c] = static_cast<scalar_t>(sum_dy_centered * inv);  // sum(dy * xhat)
      if (db_data != nullptr) db_data[c] = static_cast<scalar_t>(sum_dy);
      if (dx_data == nullptr) return;
      const double scale = inv * (w != nullptr ? load(w[c]) : 1.0);
      // Training: dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)), and
      // xhat * mean(dy * xhat) = (x - m) * inv^2 * sum(dy * (x - m)) / count.
      const auto mean_dy = static_cast<math_t>(training ? sum_dy / count : 0.0);
      const auto projection = static_cast<math_t>(training ? inv * inv * sum_dy_centered / count : 0.0);
      const auto scale_m = static_cast<math_t>(scale);
      const auto m_m = static_cast<math_t>(m);
      for_each_in_channel(layout, c, [&](int64_t i) {
        const math_t centered = static_cast<math_t>(x_data[i]) - m_m;
        dx_data[i] =
            static_cast<scalar_t>(scale_m * (static_cast<math_t>(dy_data[i]) - mean_dy - centered * projection));
      });
    });
  });
}

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps) {
  const Tensor x = kernels::contiguous(input);
  const Tensor w_tensor = optional_contiguous(weight), b_tensor = optional_contiguous(bias);
  const int64_t M = mean.numel(), K = row_length;
  SG_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = x.data_ptr<scalar_t>();
    scalar_t* y_data = out.data_ptr<scalar_t>();
    math_t* mean_data = mean.data_ptr<math_t>();
    math_t* rstd_data = rstd.data_ptr<math_t>();
    const scalar_t* w = optional_data<const scalar_t>(w_tensor);
    const scalar_t* b = optional_data<const scalar_t>(b_tensor);
    parallel_for(M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, K)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* row = x_data + r * K;
        scalar_t* y = y_data + r * K;
        const double m = lane_sum(K, [&](int64_t k) { return load(row[k]); }) / static_cast<double>(K);
        const double var = lane_sum(K,
                                    [&](int64_t k) {
                                      const double d = load(row[k]) - m;
                                      return d * d;
                                    }) /
                           static_cast<double>(K);
        const double inv = 1.0 / std::sqrt(var + eps);
        mean_data[r] = static_cast<math_t>(m);
        rstd_data[r] = static_cast<math_t>(inv);
        const auto m_m = static_cast<math_t>(m);
        const auto inv_m = static_cast<math_t>(inv);
        for (int64_t k = 0; k < K; ++k) {
          math_t value = (static_cast<math_t>(row[k]) - m_m) * inv_m;
          if (w != nullptr) value *= static_cast<math_t>(w[k]);
          if (b != nullptr) value += static_cast<math_t>(b[k]);
          y[k] = static_cast<scalar_t>(value);
        }
      }
    });
  });
}

namespace {

// Layer norm's backward takes the rows in blocks of this many, a task each; every block also keeps
// its own column sums for the weight and bias gradients.
constexpr int64_t kRowBlock = 64;

// What one row of layer norm's backward reads besides its x and dy.
struct RowContext {
  const double* weight;  // [K], in double: ones when the norm has no weight
  double* sum_dy_xhat;   // [K], the block's column sums of dy * xhat (the weight's gradient)
  double* sum_dy;        // [K], the block's column sums of dy (the bias's gradient)
  int64_t K;
};

// One row of layer norm's backward in two passes over the row (which stays in L1):
//   1. in double, the row's sums of dxhat and dxhat * xhat (dxhat = dy * w), and dy * xhat and dy
//      added into the block's column sums;
//   2. in math_t, as the forward writes its output, dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
// The first pass is one loop with no branch and two reductions, which `omp simd` lets the compiler
// vectorise: without it GCC keeps a floating-point reduction in source order, one element at a time.
// The vectorised order is fixed by the compiled code (a partial sum per vector lane, joined at the
// end), so the bits depend on the data only, never on the thread count or the scheduling.
template <typename scalar_t>
void layer_norm_row_backward(const scalar_t* row, const scalar_t* g, double m, double inv, const RowContext& context,
                             scalar_t* dx) {
  using math_t = opmath_t<scalar_t>;
  const int64_t K = context.K;
  const double* w = context.weight;
  double* sum_dy_xhat = context.sum_dy_xhat;
  double* sum_dy = context.sum_dy;
  double sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
  for (int64_t k = 0; k < K; ++k) {
    const double dy = load(g[k]);
    const double xhat = (load(row[k]) - m) * inv;
    const double dxhat = dy * w[k];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
    sum_dy_xhat[k] += dy * xhat;
    sum_dy[k] += dy;
  }
  if (dx == nullptr) return;
  const auto m_m = static_cast<math_t>(m), inv_m = static_cast<math_t>(inv);
  const auto mean_m = static_cast<math_t>(sum_dxhat / static_cast<double>(K));
  const auto projection = static_cast<math_t>(sum_dxhat_xhat / static_cast<double>(K));
  for (int64_t k = 0; k < K; ++k) {
    const math_t xhat = (static_cast<math_t>(row[k]) - m_m) * inv_m;
    const math_t dxhat = static_cast<math_t>(g[k]) * static_cast<math_t>(w[k]);
    dx[k] = static_cast<scalar_t>(inv_m * (dxhat - mean_m - xhat * projection));
  }
}

}  // namespace

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length) {
  const Tensor x = kernels::contiguous(input), dy = kernels::contiguous(grad_out);
  const Tensor w_tensor = optional_contiguous(weight);
  const int64_t M = mean.numel(), K = row_length;
  SG_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* x_data = x.data_ptr<scalar_t>();
    const scalar_t* dy_data = dy.data_ptr<scalar_t>();
    const math_t* mean_data = mean.data_ptr<math_t>();
    const math_t* rstd_data = rstd.data_ptr<math_t>();
    const scalar_t* w = optional_data<const scalar_t>(w_tensor);
    scalar_t* dx_data = optional_data<scalar_t>(grad_input);
    scalar_t* dw_data = optional_data<scalar_t>(grad_weight);
    scalar_t* db_data = optional_data<scalar_t>(grad_bias);
    std::vector<double> weight_double(K, 1.0);  // converted once, not once per row
    if (w != nullptr)
      for (int64_t k = 0; k < K; ++k) weight_double[k] = load(w[k]);
    // One pass over the rows for all three gradients: a block of rows writes its rows' dx while
    // they are in cache and adds their dy * xhat and dy into the block's own column sums (double).
    // The blocks' sums are then added in block order: the blocks depend on the shape only, so the
    // bits do not depend on the thread count. The column sums are kept even when no weight or bias
    // gradient is asked for, so that the row loop has no branch to vectorise around.
    const int64_t blocks = (M + kRowBlock - 1) / kRowBlock;
    std::vector<double> block_sums(blocks * 2 * K);  // per block: sum(dy * xhat), sum(dy)
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, kRowBlock * K));
    parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const RowContext context{weight_double.data(), block_sums.data() + block * 2 * K,
                                 block_sums.data() + block * 2 * K + K, K};
        for (int64_t r = block * kRowBlock; r < std::min(M, (block + 1) * kRowBlock); ++r)
          layer_norm_row_backward(x_data + r * K, dy_data + r * K, mean_data[r], rstd_data[r], context,
                                  dx_data != nullptr ? dx_data + r * K : nullptr);
      }
    });
    if (dw_data == nullptr && db_data == nullptr) return;
    for (int64_t k = 0; k < K; ++k) {
      double total_dy_xhat = 0;
      double total_dy = 0;
      for (int64_t block = 0; block < blocks; ++block) {
        total_dy_xhat += block_sums[block * 2 * K + k];
        total_dy += block_sums[block * 2 * K + K + k];
      }
      if (dw_data != nullptr) dw_data[k] = static_cast<scalar_t>(total_dy_xhat);
      if (db_data != nullptr) db_data[k] = static_cast<scalar_t>(total_dy);
    }
  });
}

}  // namespace sg::cpu
