#pragma once
// defines: optim::SGD, optim::SGDOptions — stochastic gradient descent with optional momentum,
//          dampening, Nesterov momentum and L2 weight decay, as torch.optim.SGD.
#include "optim/optimizer.h"

namespace sg::optim {

// Defaults equal PyTorch's (lr has been 1e-3 since PyTorch 2.2; before, it had to be given).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2 penalty: added to the gradient as weight_decay * param
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
  bool maximize = false;      // ascend the objective instead

  void check() const;  // throws on values PyTorch refuses (negative lr, nesterov without momentum, ...)

  template <typename Self, typename Visit>
  static void fields(Self& self, Visit&& visit) {
    visit("lr", self.lr);
    visit("momentum", self.momentum);
    visit("dampening", self.dampening);
    visit("weight_decay", self.weight_decay);
    visit("nesterov", self.nesterov);
    visit("maximize", self.maximize);
  }
};

// Per parameter, with g the gradient (negated if maximize) and b the momentum buffer:
//   g = g + weight_decay * p
//   b = g on the first step, else momentum * b + (1 - dampening) * g     (if momentum != 0)
//   g = nesterov ? g + momentum * b : b                                  (if momentum != 0)
//   p = p - lr * g
class SGD : public OptimizerWithOptions<SGDOptions> {
public:
  explicit SGD(TensorList params, SGDOptions options = {});
  void step() override;
};

}  // namespace sg::optim
