// Batch norm on the GPU (cuDNN, core/cuda/batch_norm.cpp) against the CPU's: training and
// evaluation, forward and backward, running statistics, with and without weight and bias.
#include "backward_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

// Tolerances: cuDNN accumulates a channel's statistics in f32 (f64 for f64), the CPU in double;
// the backward's dx subtracts two channel means from dy, so its f32 error is that of the sums
// (~1e-6 of their size), not of dx. 16-bit results may differ by one unit of the last place.
double tolerance(DType dtype) {
  if (dtype == DType::f32) return 1e-4;
  if (dtype == DType::f64) return 1e-10;
  return -1;
}

const Shape kShapes[] = {{16, 5}, {4, 3, 5, 7}, {2, 3, 4, 5, 2}, {3, 2, 9}};

}  // namespace

TEST_CASE("training batch norm and its gradients on the GPU match the CPU, running statistics included") {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      for (bool affine : {true, false}) {
        CAPTURE(shape_str(shape));
        CAPTURE(dtype);
        CAPTURE(affine);
        const int64_t C = shape[1];
        const Tensor running_mean = random({C}, dtype) * 0.1;
        const Tensor running_var = (rand({C}, {}, &test::rng()) + 0.5).to(dtype);
        const Tensor cpu_mean = running_mean.clone(), cpu_var = running_var.clone();
        const Tensor gpu_mean = running_mean.to(gpu()), gpu_var = running_var.to(gpu());
        const TensorList inputs{random(shape, dtype) * 2.0 + 0.5, affine ? random({C}, dtype) : Tensor(),
                                affine ? random({C}, dtype) : Tensor()};
        test::check_forward_backward_match_cpu(
            [&](const TensorList& t) {
              const bool on_gpu = t[0].device().is_cuda();
              return batch_norm(t[0], t[1], t[2], on_gpu ? gpu_mean : cpu_mean, on_gpu ? gpu_var : cpu_var,
                                /*training=*/true, /*momentum=*/0.3, /*eps=*/1e-3);
            },
            inputs, tolerance(dtype), tolerance(dtype));
        test::check_matches_cpu(gpu_mean, cpu_mean, tolerance(dtype));
        test::check_matches_cpu(gpu_var, cpu_var, tolerance(dtype));  // moved by the UNBIASED variance
      }
    }
  }
}

TEST_CASE("training batch norm without running statistics on the GPU matches the CPU") {
  const Tensor input = random({6, 4, 3, 3}, DType::f32);
  test::check_forward_backward_match_cpu(
      [](const TensorList& t) { return batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), /*training=*/true); },
      {input, random({4}, DType::f32), random({4}, DType::f32)}, 1e-4, 1e-4);
}

TEST_CASE("evaluation batch norm and its gradients on the GPU match the CPU, running statistics unchanged") {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      CAPTURE(shape_str(shape));
      CAPTURE(dtype);
      const int64_t C = shape[1];
      const Tensor running_mean = random({C}, dtype) * 0.1;
      const Tensor running_var = (rand({C}, {}, &test::rng()) + 0.5).to(dtype);
      const Tensor gpu_mean = running_mean.to(gpu()), gpu_var = running_var.to(gpu());
      test::check_forward_backward_match_cpu(
          [&](const TensorList& t) {
            const bool on_gpu = t[0].device().is_cuda();
            return batch_norm(t[0], t[1], t[2], on_gpu ? gpu_mean : running_mean, on_gpu ? gpu_var : running_var,
                              /*training=*/false);
          },
          {random(shape, dtype), random({C}, dtype), random({C}, dtype)}, tolerance(dtype), tolerance(dtype));
      test::check_matches_cpu(gpu_mean, running_mean, 0.0);
      test::check_matches_cpu(gpu_var, running_var, 0.0);
    }
  }
}
