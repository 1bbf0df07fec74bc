// Fit y = 3x - 2 with a two-parameter model and plain gradient descent.
#include <cstdio>

#include "syncgrad.h"

int main() {
  sg::manual_seed(0);
  sg::Tensor x = sg::randn({64, 1});
  sg::Tensor y = x * 3.0 - 2.0;

  sg::Tensor w = sg::zeros({1}).requires_grad_();
  sg::Tensor b = sg::zeros({1}).requires_grad_();
  for (int step = 0; step <= 100; ++step) {
    sg::Tensor loss = ((x * w + b) - y).pow(2.0).mean();
    loss.backward();
    {
      sg::NoGradGuard no_grad;  // the update itself is not part of the graph
      w.sub_(w.grad(), 0.1);
      b.sub_(b.grad(), 0.1);
      w.mutable_grad().zero_();
      b.mutable_grad().zero_();
    }
    if (step % 20 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item());
  }
  std::printf("w = %.4f (expected 3), b = %.4f (expected -2)\n", w.item(), b.item());
}
