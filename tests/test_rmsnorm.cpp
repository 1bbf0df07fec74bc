// nn::RMSNorm: the composite layer docs/new-layer.md walks through — values by hand, gradcheck
// through the ops it is made of, PyTorch's defaults, and its error.
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"

using namespace sg;

TEST_CASE("RMSNorm divides each row by its root mean square, then scales by weight") {
  nn::RMSNorm norm({4}, 1e-6);
  norm.to(DType::f64);
  const double rms = std::sqrt((1.0 + 4 + 9 + 16) / 4 + 1e-6);  // row 1, 2, 3, 4
  test::check_close(norm(tensor(std::vector<double>{1, 2, 3, 4}, {1, 4})), {1 / rms, 2 / rms, 3 / rms, 4 / rms}, 1e-12);
  norm.weight.detach().copy_(tensor(std::vector<double>{1, -1, 2, 0.5}, {4}));
  test::check_close(norm(tensor(std::vector<double>{1, 2, 3, 4}, {1, 4})), {1 / rms, -2 / rms, 6 / rms, 2 / rms},
                    1e-12);
}

TEST_CASE("RMSNorm's eps defaults to the machine epsilon of the input's dtype, as in PyTorch") {
  nn::RMSNorm norm({2});
  CHECK(norm.named_parameters().size() == 1);
  CHECK(norm.named_parameters()[0].first == "weight");
  // A zero row divides 0 by sqrt(eps): 0, not NaN; a tiny row shows which eps was added.
  const double tiny = 1e-4;
  const double expected = tiny / std::sqrt(tiny * tiny + std::numeric_limits<float>::epsilon());
  test::check_close(norm(tensor(std::vector<double>{tiny, tiny}, {1, 2}).to(DType::f32)), {expected, expected}, 1e-6);
  CHECK(norm.str() == "RMSNorm([2], eps=None, elementwise_affine=True)");
}

TEST_CASE("RMSNorm passes gradcheck for its input and weight over the last one and two dims") {
  for (const Shape& normalized : {Shape{5}, Shape{3, 4}}) {
    nn::RMSNorm norm(normalized, 1e-5);
    norm.to(DType::f64);
    norm.weight.detach().copy_(test::rand_input(normalized, 0.5, 1.5));
    Shape input_shape = {2};
    input_shape.insert(input_shape.end(), normalized.begin(), normalized.end());
    // gradcheck perturbs its inputs in place, so the layer's own weight can be one of them.
    CHECK_GRADCHECK([&](const TensorList& in) { return norm(in[0]); },
                    {test::noncontiguous_input(input_shape), norm.weight});
  }
}

TEST_CASE("RMSNorm rejects an input that does not end with normalized_shape, naming both") {
  nn::RMSNorm norm({3, 4});
  CHECK_THROWS_WITH_AS(norm(zeros({2, 4, 3})),
                       doctest::Contains("input of shape [2, 4, 3] does not end with normalized_shape [3, 4]"), Error);
}
