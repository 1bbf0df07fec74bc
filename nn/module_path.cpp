#include "nn/module_path.h"

#include <vector>

#include "nn/module.h"

namespace sg::nn {

namespace {

struct CalledModule {
  Module* module;
  std::string path;  // dotted, from the outermost called module ("" for it)
};
thread_local std::vector<CalledModule> called_modules;

// `module`'s dotted name inside `parent` (found among all descendants, so a child reached through
// a helper that skips operator() still gets its full name), or its class name in angle brackets
// when `parent` does not hold it.
std::string name_inside(Module& parent, const Module& module) {
  for (const auto& [name, descendant] : parent.named_modules())
    if (descendant.get() == &module && !name.empty()) return name;
  std::string bracketed = "<";
  bracketed += module.type_name();
  bracketed += '>';
  return bracketed;
}

}  // namespace

ModuleCallScope::ModuleCallScope(Module& module) {
  if (!autograd::is_anomaly_enabled()) return;
  std::string path;
  if (!called_modules.empty()) {
    const CalledModule& parent = called_modules.back();
    const std::string name = name_inside(*parent.module, module);
    path = parent.path.empty() ? name : parent.path + "." + name;
  }
  called_modules.push_back({&module, path});
  path_.emplace((path.empty() ? std::string("<root>") : path) + " (" + module.type_name() + ")");
}

ModuleCallScope::~ModuleCallScope() {
  if (path_) called_modules.pop_back();
}

}  // namespace sg::nn
