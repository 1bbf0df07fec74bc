#include "autograd/custom_function.h"

#include <cxxabi.h>

#include <cstdlib>

namespace sg::autograd {

void FunctionContext::save_for_backward(const TensorList& tensors) {
  saved_.clear();
  for (const Tensor& tensor : tensors) saved_.emplace_back(tensor);
}

TensorList FunctionContext::saved_tensors() const {
  TensorList tensors;
  for (const SavedTensor& saved : saved_) tensors.push_back(saved.get());
  return tensors;
}

namespace detail {

std::string short_type_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : type.name();
  std::free(demangled);
  const size_t last_colon = name.rfind("::");
  return last_colon == std::string::npos ? name : name.substr(last_colon + 2);
}

void check_backward_gradients(const std::string& node_name, const TensorList& gradients,
                              const std::vector<std::optional<Shape>>& input_shapes) {
  SG_CHECK(gradients.size() == input_shapes.size(), node_name, ": backward returned ", gradients.size(),
           " gradients, but forward took ", input_shapes.size(),
           " arguments (return one per argument, an undefined Tensor where there is none)");
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (!gradients[i].defined()) continue;
    SG_CHECK(input_shapes[i].has_value(), node_name, ": backward returned a gradient for argument ", i,
             ", which is not a tensor (return an undefined Tensor there)");
    SG_CHECK(gradients[i].sizes() == *input_shapes[i], node_name, ": backward returned a gradient of shape ",
             shape_str(gradients[i].sizes()), " for argument ", i, " of shape ", shape_str(*input_shapes[i]));
  }
}

}  // namespace detail

}  // namespace sg::autograd
