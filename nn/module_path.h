#pragma once
// defines: ModuleCallScope — names the module whose forward is running, for anomaly mode.
#include <optional>
#include <string>

#include "autograd/anomaly_mode.h"

namespace sg::nn {

class Module;

// Module::operator() holds one while forward runs. In anomaly mode it pushes the module's dotted
// path from the outermost module called on this thread (`blocks.1.attn.c_proj`) so the nodes
// recorded inside name it (Note [Anomaly mode] in autograd/anomaly_mode.h); otherwise it does
// nothing beyond one branch. A module reached by calling forward() directly is not pushed: its ops
// are named after the nearest module called through operator().
class ModuleCallScope {
public:
  explicit ModuleCallScope(Module& module);
  ~ModuleCallScope();
  ModuleCallScope(const ModuleCallScope&) = delete;
  ModuleCallScope& operator=(const ModuleCallScope&) = delete;

private:
  std::optional<autograd::ModulePathScope> path_;
};

}  // namespace sg::nn
