#include "optim/sgd.h"

#include <cmath>

#include "core/factory.h"
#include "core/kernels/optim.h"

namespace sg::optim {

void SGDOptions::check() const {
  SG_CHECK(std::isfinite(lr) && lr >= 0.0, "SGD: invalid learning rate ", lr, " (lr must be finite and >= 0)");
  SG_CHECK(std::isfinite(momentum) && momentum >= 0.0, "SGD: invalid momentum ", momentum);
  SG_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0, "SGD: invalid weight_decay ", weight_decay);
  SG_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0),
           "SGD: Nesterov momentum requires a momentum and zero dampening (momentum ", momentum, ", dampening ",
           dampening, ")");
}

SGD::SGD(TensorList params, SGDOptions options) : OptimizerWithOptions("SGD", std::move(params), options) {}

void SGD::step() {
  for_each_param_with_grad([](Tensor& param, const Tensor& grad, const SGDOptions& o, ParamState& state) {
    SGDStep step{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize, /*first_step=*/false};
    if (o.momentum != 0.0 && !state.momentum_buffer.defined()) {
      state.momentum_buffer = empty_like(param);  // the kernel sets it to the gradient
      step.first_step = true;
    }
    kernels::sgd_step(param, grad, state.momentum_buffer, step);
  });
}

}  // namespace sg::optim
