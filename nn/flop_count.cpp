#include "nn/flop_count.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/shape.h"
#include "nn/conv.h"
#include "nn/linear.h"

namespace sg::nn {

namespace {

// The weight of a layer whose forward is one matrix product per output element (Note [Model FLOPs]),
// or nullptr for any other module.
const Tensor* product_weight(Module& module) {
  if (auto* linear = dynamic_cast<Linear*>(&module)) return &linear->weight;
  if (auto* conv = dynamic_cast<Conv2d*>(&module)) return &conv->weight;
  return nullptr;
}

// While alive: a forward hook on every Conv2d and Linear of the model adding up their multiply-adds,
// and the whole model in eval mode. Undoes both when it goes, also when the forward threw.
class MultiplyAddCounter {
public:
  explicit MultiplyAddCounter(Module& model) {
    for (const auto& [name, module] : model.named_modules()) {
      modes_.emplace_back(module, module->is_training());
      if (const Tensor* weight = product_weight(*module))
        handles_.push_back(module->register_forward_hook([this, weight](Module&, const Tensor&, const Tensor& output) {
          multiply_adds += output.numel() * (weight->numel() / weight->size(0));
          ++layers_called;
          return std::optional<Tensor>{};
        }));
    }
    model.eval();
  }
  ~MultiplyAddCounter() {
    for (RemovableHandle& handle : handles_) handle.remove();
    // named_modules lists a parent before its children, and train() sets a module's children too:
    // restoring in that order leaves every module as it was.
    for (const auto& [module, training] : modes_) module->train(training);
  }
  MultiplyAddCounter(const MultiplyAddCounter&) = delete;
  MultiplyAddCounter& operator=(const MultiplyAddCounter&) = delete;

  int64_t multiply_adds = 0;
  int64_t layers_called = 0;

private:
  std::vector<RemovableHandle> handles_;
  std::vector<std::pair<std::shared_ptr<Module>, bool>> modes_;
};

}  // namespace

int64_t forward_flops(Module& model, const Tensor& sample_input) {
  MultiplyAddCounter counter(model);
  {
    NoGradGuard no_grad;
    model(sample_input);
  }
  SG_CHECK(counter.layers_called > 0, "forward_flops: the forward of ", model.type_name(), " on an input of shape ",
           shape_str(sample_input.sizes()),
           " called no Conv2d or Linear layer through operator(), so its products cannot be counted by hooks "
           "(Note [Model FLOPs] in nn/flop_count.h)");
  return 2 * counter.multiply_adds;
}

int64_t training_flops(Module& model, const Tensor& sample_input) { return 3 * forward_flops(model, sample_input); }

}  // namespace sg::nn
