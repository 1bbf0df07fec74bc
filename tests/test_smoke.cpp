#include "helpers.h"

using namespace sg;

TEST_CASE("add and mul broadcast and backpropagate") {
  Tensor a = tensor(std::vector<double>{1, 2, 3}).requires_grad_();
  Tensor b = tensor(std::vector<double>{10, 20}, {2, 1}).requires_grad_();
  Tensor c = (a * b + a).sum();
  CHECK(c.item() == doctest::Approx(6 * 30 + 2 * 6));
  c.backward();
  CHECK(test::values(a.grad()) == std::vector<double>{32, 32, 32});
  CHECK(test::values(b.grad()) == std::vector<double>{6, 6});
}
