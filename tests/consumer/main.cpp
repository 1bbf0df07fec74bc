// Exits 0 only if the installed headers and library compute a gradient correctly.
#include <syncgrad.h>

int main() {
  sg::Tensor x = sg::tensor(std::vector<float>{1, 2, 3}).requires_grad_();
  (x * x).sum().backward();
  return x.grad().sum().item() == 12.0 ? 0 : 1;
}
