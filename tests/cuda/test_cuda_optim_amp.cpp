// The fused optimizer kernels, the loss scaler's unscale and gradient clipping on the GPU, against
// the CPU.
// Both run the per-element math of core/optim_math.h and core/amp_math.h; they differ at most by
// the compilers' fusing of multiply-adds, so trajectories of a few steps agree to the dtype's
// tolerance (core's f32 bar is 1e-5; f16/bf16 to 2 units of their last place).
#include "core/kernels/amp.h"
#include "core/kernels/optim.h"
#include "cuda_compare.h"
#include "helpers.h"
#include "optim/clip_grad.h"

#include <cmath>
#include <limits>

using namespace sg;
using test::gpu;

namespace {

// A parameter-shaped random tensor on the CPU, in `dtype`.
Tensor random_like_param(const Shape& shape, DType dtype, double scale = 1.0) {
  return (randn(shape, {}, &test::rng()) * scale).to(dtype);
}

// CPU and GPU copies of the same values; transposed views when `strided`, so the kernels walk
// non-contiguous operands.
struct Pair {
  Tensor cpu, gpu;
};
Pair pair_of(const Tensor& values, bool strided) {
  if (!strided) return {values.clone(), values.to(gpu())};
  const Tensor cpu_t = values.t().contiguous();  // storage holds the transpose; .t() views it back
  return {cpu_t.t(), cpu_t.to(gpu()).t()};
}

constexpr int64_t kRows = 37, kCols = 19;  // odd, so no vector width divides a row

}  // namespace

TEST_CASE("sgd_step on the GPU follows the CPU trajectory with momentum, nesterov, dampening and weight decay") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(dtype);
        CAPTURE(strided);
        CAPTURE(variant);
        SGDStep step;
        step.lr = 0.05;
        step.momentum = variant == 0 ? 0.0 : 0.9;
        step.dampening = variant == 2 ? 0.1 : 0.0;
        step.nesterov = variant == 3;
        step.weight_decay = variant >= 2 ? 1e-2 : 0.0;
        step.maximize = variant == 1;
        Pair param = pair_of(random_like_param({kRows, kCols}, dtype), strided);
        Pair buffer = pair_of(zeros({kRows, kCols}, {dtype}), strided);
        for (int iteration = 0; iteration < 4; ++iteration) {
          const Tensor grad = random_like_param({kRows, kCols}, dtype);
          const Pair g = pair_of(grad, strided);
          step.first_step = iteration == 0;
          const Tensor cpu_buffer = step.momentum != 0.0 ? buffer.cpu : Tensor();
          const Tensor gpu_buffer = step.momentum != 0.0 ? buffer.gpu : Tensor();
          kernels::sgd_step(param.cpu, g.cpu, cpu_buffer, step);
          kernels::sgd_step(param.gpu, g.gpu, gpu_buffer, step);
        }
        test::check_matches_cpu(param.gpu, param.cpu);
        if (step.momentum != 0.0) test::check_matches_cpu(buffer.gpu, buffer.cpu);
      }
    }
  }
}

TEST_CASE("adam_step on the GPU follows the CPU trajectory for Adam, AdamW and amsgrad") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(dtype);
        CAPTURE(strided);
        CAPTURE(variant);
        AdamStep step;
        step.lr = 1e-2;
        step.weight_decay = variant == 0 ? 0.0 : 1e-2;
        step.decoupled_weight_decay = variant == 2;  // AdamW
        step.amsgrad = variant == 3;
        step.maximize = variant == 1;
        Pair param = pair_of(random_like_param({kRows, kCols}, dtype), strided);
        Pair exp_avg = pair_of(zeros({kRows, kCols}, {dtype}), strided);
        Pair exp_avg_sq = pair_of(zeros({kRows, kCols}, {dtype}), strided);
        Pair max_exp_avg_sq = pair_of(zeros({kRows, kCols}, {dtype}), strided);
        for (int iteration = 1; iteration <= 4; ++iteration) {
          const Pair g = pair_of(random_like_param({kRows, kCols}, dtype), strided);
          step.step = iteration;
          kernels::adam_step(param.cpu, g.cpu, exp_avg.cpu, exp_avg_sq.cpu,
                             step.amsgrad ? max_exp_avg_sq.cpu : Tensor(), step);
          kernels::adam_step(param.gpu, g.gpu, exp_avg.gpu, exp_avg_sq.gpu,
                             step.amsgrad ? max_exp_avg_sq.gpu : Tensor(), step);
        }
        test::check_matches_cpu(param.gpu, param.cpu);
        test::check_matches_cpu(exp_avg.gpu, exp_avg.cpu);
        test::check_matches_cpu(exp_avg_sq.gpu, exp_avg_sq.cpu);
        if (step.amsgrad) test::check_matches_cpu(max_exp_avg_sq.gpu, max_exp_avg_sq.cpu);
      }
    }
  }
}

TEST_CASE("an optimizer state tensor on another device than the parameter is refused") {
  const Tensor param = zeros({3}, {DType::f32, gpu()});
  const Tensor grad = zeros({3}, {DType::f32, Device::cpu()});
  CHECK_THROWS_AS(kernels::sgd_step(param, grad, Tensor(), SGDStep{}), Error);
}

TEST_CASE("unscale on the GPU multiplies by 1/scale and leaves found_inf at 0 when every gradient is finite") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(strided);
      Pair grad = pair_of(random_like_param({kRows, kCols}, dtype, 1000.0), strided);
      const Tensor cpu_found = zeros({1}, {DType::f32});
      const Tensor gpu_found = zeros({1}, {DType::f32, gpu()});
      kernels::non_finite_check_and_unscale_(grad.cpu, cpu_found, 1.0 / 1024.0);
      kernels::non_finite_check_and_unscale_(grad.gpu, gpu_found, 1.0 / 1024.0);
      // One multiplication in opmath_t and one rounding (core/half.h on both sides): identical bits.
      test::check_matches_cpu(grad.gpu, grad.cpu, 0.0);
      CHECK(gpu_found.item() == 0.0);
    }
  }
}

TEST_CASE("unscale on the GPU sets found_inf for an inf or a NaN anywhere, and a set flag stays set") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::quiet_NaN()}) {
      CAPTURE(dtype);
      CAPTURE(bad);
      Tensor values = random_like_param({1000, 3}, DType::f64);
      values.data_ptr<double>()[2 * 3 + 1] = bad;  // one bad element, far from the last block
      const Tensor grad = values.to(dtype).to(gpu());
      const Tensor found = zeros({1}, {DType::f32, gpu()});
      kernels::non_finite_check_and_unscale_(grad, found, 0.5);
      CHECK(found.item() == 1.0);
      const Tensor finite = random_like_param({5}, dtype).to(gpu());
      kernels::non_finite_check_and_unscale_(finite, found, 0.5);  // collects over gradients: stays 1
      CHECK(found.item() == 1.0);
    }
  }
}

TEST_CASE("clip_grad_norm_ of GPU gradients matches the CPU's in every norm, NaN included") {
  for (DType dtype : {DType::f32, DType::f16}) {
    for (double norm_type : {2.0, 1.0, 3.0, optim::kInfNorm}) {
      for (bool with_nan : {false, true}) {
        CAPTURE(dtype);
        CAPTURE(norm_type);
        CAPTURE(with_nan);
        TensorList cpu_params, gpu_params;
        for (const Shape& shape : {Shape{kRows, kCols}, Shape{kCols}, Shape{3, 5, 7}}) {
          Tensor values = random_like_param(shape, dtype);
          Tensor cpu_param = zeros(shape, {dtype}), gpu_param = zeros(shape, {dtype, gpu()});
          cpu_param.set_grad(values.clone());
          gpu_param.set_grad(values.to(gpu()));
          cpu_params.push_back(cpu_param);
          gpu_params.push_back(gpu_param);
        }
        if (with_nan) {
          cpu_params[1].grad().view({-1}).select(0, 4).fill_(std::nan(""));
          gpu_params[1].grad().view({-1}).select(0, 4).fill_(std::nan(""));
        }
        const double cpu_norm = optim::clip_grad_norm_(cpu_params, 0.5, norm_type);
        const double gpu_norm = optim::clip_grad_norm_(gpu_params, 0.5, norm_type);
        if (with_nan) {
          CHECK(std::isnan(cpu_norm));
          CHECK(std::isnan(gpu_norm));
        } else {
          CHECK(gpu_norm == doctest::Approx(cpu_norm).epsilon(test::tolerance_for(dtype)));
          for (size_t k = 0; k < cpu_params.size(); ++k)
            test::check_matches_cpu(gpu_params[k].grad(), cpu_params[k].grad());
        }
      }
    }
  }
}
