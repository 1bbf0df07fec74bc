// Softmax and log-softmax on the GPU (core/cuda/softmax.cu) against the CPU's, forward and
// backward: along every dim (contiguous rows get a block each, strided rows a thread each), for
// strided inputs, and rows of -inf.
#include <cmath>
#include <limits>

#include "backward_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

Tensor random(const Shape& shape, DType dtype) { return (randn(shape, {}, &test::rng()) * 3.0).to(dtype); }

// The backward sums g * y over a row before subtracting: in f32 its error is that of the sum
// (~1e-6 of its size), not of each element. 16-bit results may differ by a unit of the last place.
double gradient_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-4 : -1; }

}  // namespace

TEST_CASE("softmax and log_softmax with their gradients match the CPU along every dim, in every floating dtype") {
  for (const Shape& shape : {Shape{3, 5, 70}, Shape{2, 1000}, Shape{4, 3, 6}, Shape{7}, Shape{1, 33, 1}}) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        CAPTURE(shape_str(shape));
        CAPTURE(dtype);
        CAPTURE(dim);
        const Tensor x = random(shape, dtype);
        test::check_forward_backward_match_cpu([dim](const TensorList& t) { return t[0].softmax(dim); }, {x}, -1,
                                               gradient_tolerance(dtype));
        test::check_forward_backward_match_cpu([dim](const TensorList& t) { return t[0].log_softmax(dim); }, {x}, -1,
                                               gradient_tolerance(dtype));
      }
    }
  }
}

TEST_CASE("softmax of transposed and sliced GPU tensors matches the CPU") {
  const Tensor x = random({40, 9, 6}, DType::f32);
  test::check_forward_backward_match_cpu([](const TensorList& t) { return t[0].transpose(0, 2).softmax(2); }, {x}, -1,
                                         1e-4);
  test::check_forward_backward_match_cpu([](const TensorList& t) { return t[0].slice(0, 1, 40, 3).log_softmax(0); },
                                         {x}, -1, 1e-4);
}

TEST_CASE("a softmax row of -inf gives NaN on the GPU, as on the CPU") {
  for (int64_t length : {5, 64}) {  // one thread per row, and one block per row
    CAPTURE(length);
    std::vector<double> data = test::values(randn({2, length}, {DType::f64, Device::cpu()}, &test::rng()));
    for (int64_t i = 0; i < length; ++i) data[i] = -std::numeric_limits<double>::infinity();
    const Tensor x = tensor(data, {2, length}).to(DType::f32);
    for (bool log : {false, true}) {
      CAPTURE(log);
      const auto run = [log](const Tensor& t) { return log ? t.log_softmax(1) : t.softmax(1); };
      const Tensor cpu = run(x), on_gpu = run(x.to(gpu()));
      CHECK(std::isnan(test::values(cpu)[0]));
      test::check_matches_cpu(on_gpu, cpu);  // NaN where the CPU has NaN, the finite row close
    }
  }
}
