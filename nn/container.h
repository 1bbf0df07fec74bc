#pragma once
// defines: nn::Sequential (chains its modules' forwards) and nn::ModuleList (holds modules for
//          a forward written by hand); both name their children by position: "0", "1", ...
#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace sg::nn {

// An ordered list of child modules registered as "0", "1", ..., so parameters read "0.weight".
class ModuleSequence : public Module {
public:
  // Appends a module and returns it with its own type, so the caller can keep a typed handle.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

protected:
  ModuleSequence() = default;
  explicit ModuleSequence(std::initializer_list<std::shared_ptr<Module>> modules);

private:
  void append(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};

// forward(x) = module_n(...module_1(module_0(x))); an empty Sequential returns x.
class Sequential : public ModuleSequence {
public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleSequence(modules) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }
};

// Registers its modules (so their parameters are the owner's) but has no forward of its own.
class ModuleList : public ModuleSequence {
public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleSequence(modules) {}
  std::string type_name() const override { return "ModuleList"; }
};

}  // namespace sg::nn
