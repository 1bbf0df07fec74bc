#include "nn/container.h"

#include <string>
#include <utility>

namespace sg::nn {

ModuleSequence::ModuleSequence(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) append(module);
}

void ModuleSequence::append(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleSequence::operator[](size_t index) const {
  SG_CHECK(index < modules_.size(), type_name(), ": index ", index, " is out of range for ", modules_.size(),
           " modules");
  return modules_[index];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& module : *this) x = (*module)(x);
  return x;
}

}  // namespace sg::nn
