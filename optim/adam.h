#pragma once
// defines: optim::Adam, optim::AdamW and their options — Adam with bias correction, optional
//          AMSGrad, and L2 (Adam) or decoupled (AdamW) weight decay, as torch.optim.Adam/AdamW.
#include "optim/optimizer.h"

namespace sg::optim {

// Adam and AdamW take the same options; only the default weight decay differs, as in PyTorch
// (0 for Adam, 1e-2 for AdamW), so `AdamW(params, {.lr = 3e-4})` keeps AdamW's decay.
template <double DefaultWeightDecay>
struct AdamFamilyOptions {
  double lr = 1e-3;
  double beta1 = 0.9;    // PyTorch's betas[0]
  double beta2 = 0.999;  // PyTorch's betas[1]
  double eps = 1e-8;
  double weight_decay = DefaultWeightDecay;
  bool amsgrad = false;
  bool maximize = false;

  void check() const;  // throws on values PyTorch refuses (negative lr or eps, betas outside [0, 1), ...)
  template <typename Self, typename Visit>
  static void fields(Self& self, Visit&& visit) {
    visit("lr", self.lr);
    visit("beta1", self.beta1);
    visit("beta2", self.beta2);
    visit("eps", self.eps);
    visit("weight_decay", self.weight_decay);
    visit("amsgrad", self.amsgrad);
    visit("maximize", self.maximize);
  }
};
using AdamOptions = AdamFamilyOptions<0.0>;
using AdamWOptions = AdamFamilyOptions<1e-2>;

// Per parameter, at step t (counted per parameter, from 1), with g the gradient (negated if
// maximize), m and v the moment estimates:
//   g = g + weight_decay * p                      (Adam; AdamW instead does p = p * (1 - lr * weight_decay))
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   v_max = max(v_max, v), used in place of v     (amsgrad)
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public OptimizerWithOptions<AdamOptions> {
public:
  explicit Adam(TensorList params, AdamOptions options = {});
  void step() override;
};

class AdamW : public OptimizerWithOptions<AdamWOptions> {
public:
  explicit AdamW(TensorList params, AdamWOptions options = {});
  void step() override;
};

}  // namespace sg::optim
