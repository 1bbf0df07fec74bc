#pragma once
// defines: optim::Adam, optim::AdamW and their options — Adam with bias correction, optional
//          AMSGrad, and L2 (Adam) or decoupled (AdamW) weight decay, as torch.optim.Adam/AdamW.
#include "optim/optimizer.h"

namespace sg::optim {

// Adam and AdamW take the same options; only the default weight decay differs, as in PyTorch
// (0 for Adam, 1e-2 for AdamW), so `AdamW(params, {.lr = 3e-4})` keeps AdamW's decay. (The
// default comes in a type, not as a `double` template argument: clang 14, which builds the fuzz
// targets, does not take floating-point template arguments yet.)
template <typename Defaults>
struct AdamFamilyOptions {
  double lr = 1e-3;
  double beta1 = 0.9;    // PyTorch's betas[0]
  double beta2 = 0.999;  // PyTorch's betas[1]
  double eps = 1e-8;
  double weight_decay = Defaults::weight_decay;
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
struct AdamDefaults {
  static constexpr double weight_decay = 0.0;
};
struct AdamWDefaults {
  static constexpr double weight_decay = 1e-2;
};
using AdamOptions = AdamFamilyOptions<AdamDefaults>;
using AdamWOptions = AdamFamilyOptions<AdamWDefaults>;

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
