// Layer norm and cross-entropy / NLL on the GPU (core/cuda/layer_norm.cu, cross_entropy.cu)
// against the CPU's, forward and backward: every floating dtype, short and long rows, with and
// without weights, and every cross-entropy option (ignore_index, label smoothing, class weights,
// each reduction, positions after the class dim).
#include <vector>

#include "backward_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;
namespace F = sg::nn::functional;

namespace {

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

// f32 gradients pass through row or column sums (accumulated in double, but of f32 terms rounded
// in another order): ~1e-6 of the sums' size, so 1e-4 relative. 16-bit: a unit of the last place.
double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-4 : -1; }

const DType kFloating[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// [N, ...] targets in [0, C), every third row set to `ignore_index`.
Tensor targets_with_ignored(const Shape& shape, int64_t C, int64_t ignore_index) {
  const std::vector<double> drawn = test::values(randint(0, C, shape, {DType::i64, Device::cpu()}, &test::rng()));
  std::vector<int64_t> targets(drawn.begin(), drawn.end());
  for (size_t i = 0; i < targets.size(); i += 3) targets[i] = ignore_index;
  return tensor(targets, shape);
}

}  // namespace

TEST_CASE("layer norm and its gradients on the GPU match the CPU, with and without weight and bias") {
  struct Case {
    Shape shape, normalized;
  };
  // Short rows (a thread each), long rows (a block each), more rows than one chunk of the
  // weight-gradient sum (128).
  for (const Case& c : {Case{{6, 10}, {10}}, Case{{2, 3, 64}, {3, 64}}, Case{{5, 7}, {7}}, Case{{300, 40}, {40}},
                        Case{{3, 1000}, {1000}}}) {
    for (DType dtype : kFloating) {
      for (bool affine : {true, false}) {
        CAPTURE(shape_str(c.shape));
        CAPTURE(dtype);
        CAPTURE(affine);
        const TensorList inputs{random(c.shape, dtype) * 2.0 + 0.5, affine ? random(c.normalized, dtype) : Tensor(),
                                affine ? random(c.normalized, dtype) : Tensor()};
        const Shape normalized = c.normalized;
        test::check_forward_backward_match_cpu(
            [normalized](const TensorList& t) { return layer_norm(t[0], normalized, t[1], t[2], 1e-5); }, inputs,
            tolerance(dtype), tolerance(dtype));
      }
    }
  }
}

TEST_CASE("layer norm of a transposed GPU input matches the CPU") {
  test::check_forward_backward_match_cpu(
      [](const TensorList& t) { return layer_norm(t[0].t(), {12}, t[1], t[2], 1e-5); },
      {random({12, 50}, DType::f32), random({12}, DType::f32), random({12}, DType::f32)}, 1e-4, 1e-4);
}

TEST_CASE("cross entropy and nll_loss with their gradients on the GPU match the CPU for every option") {
  struct Case {
    Shape input;  // [N, C, ...]
    int64_t ignore_index;
  };
  // C = 5 (a thread per row), C = 100 (a block per row), positions after the class dim; an
  // ignore_index outside the classes and one that is a class.
  for (const Case& c : {Case{{8, 5}, -100}, Case{{6, 100}, 1}, Case{{4, 7, 3}, -100}, Case{{2, 40, 2, 3}, 3}}) {
    for (DType dtype : kFloating) {
      for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
        for (bool weighted : {false, true}) {
          CAPTURE(shape_str(c.input));
          CAPTURE(dtype);
          CAPTURE(static_cast<int>(reduction));
          CAPTURE(weighted);
          const int64_t C = c.input[1];
          Shape target_shape = c.input;
          target_shape.erase(target_shape.begin() + 1);
          const Tensor target = targets_with_ignored(target_shape, C, c.ignore_index);
          const Tensor weight = weighted ? (rand({C}, {}, &test::rng()) + 0.5).to(dtype) : Tensor();
          const Tensor target_gpu = target.to(gpu()), weight_gpu = weighted ? weight.to(gpu()) : Tensor();
          for (double smoothing : {0.0, 0.2}) {
            CAPTURE(smoothing);
            test::check_forward_backward_match_cpu(
                [&](const TensorList& t) {
                  const bool on_gpu = t[0].device().is_cuda();
                  return F::cross_entropy(t[0], on_gpu ? target_gpu : target,
                                          {on_gpu ? weight_gpu : weight, c.ignore_index, reduction, smoothing});
                },
                {random(c.input, dtype) * 3.0}, tolerance(dtype), tolerance(dtype));
          }
          test::check_forward_backward_match_cpu(
              [&](const TensorList& t) {
                const bool on_gpu = t[0].device().is_cuda();
                return F::nll_loss(t[0].log_softmax(1), on_gpu ? target_gpu : target,
                                   {on_gpu ? weight_gpu : weight, c.ignore_index, reduction});
              },
              {random(c.input, dtype) * 3.0}, tolerance(dtype), tolerance(dtype));
        }
      }
    }
  }
}

TEST_CASE("cross entropy of a transposed GPU input matches the CPU") {
  const Tensor target = randint(0, 9, {20}, {DType::i64, Device::cpu()}, &test::rng());
  const Tensor target_gpu = target.to(gpu());
  test::check_forward_backward_match_cpu(
      [&](const TensorList& t) { return F::cross_entropy(t[0].t(), t[0].device().is_cuda() ? target_gpu : target); },
      {random({9, 20}, DType::f32)}, 1e-5, 1e-4);
}

TEST_CASE("a target out of range on the GPU is an error naming it and the number of classes") {
  const Tensor input = random({4, 5}, DType::f32).to(gpu());
  const Tensor target = tensor(std::vector<int64_t>{0, 4, 7, -100}).to(gpu());
  CHECK_THROWS_WITH_AS(F::cross_entropy(input, target), doctest::Contains("target 7 is out of range for 5 classes"),
                       Error);
  const Tensor negative = tensor(std::vector<int64_t>{0, -1, 2, 3}).to(gpu());
  CHECK_THROWS_WITH_AS(F::nll_loss(input, negative), doctest::Contains("target -1 is out of range for 5 classes"),
                       Error);
}
