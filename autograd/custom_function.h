#pragma once
// defines: Function<Op>, FunctionContext — an op whose forward and backward a user writes by
//          hand, as a struct (PyTorch's torch.autograd.Function), recorded through record()
//          like every built-in op.
//
//   struct Cube {
//     static Tensor forward(FunctionContext& ctx, const Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;
//     }
//     // d/dx x^3 = 3 x^2
//     static TensorList backward(FunctionContext& ctx, const TensorList& grad_outputs) {
//       const Tensor x = ctx.saved_tensors()[0];
//       return {grad_outputs[0] * x * x * 3.0};
//     }
//   };
//   Tensor y = autograd::Function<Cube>::apply(x);
//
// - forward runs with grad mode off: the ops inside it record nothing, the whole op is one node.
// - forward returns one tensor (every node here has one differentiable output), so backward gets
//   a list of one gradient. It returns one gradient per forward argument, in order, each of its
//   input's shape, or an undefined Tensor for a non-tensor argument or an input that needs none
//   (ctx.needs_input_grad()). A wrong count or shape throws, naming the op.
// - The node is named `<Op>Backward` ("CubeBackward"); a struct can choose the name with
//   `static constexpr const char* name = "...";`.
#include <any>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "autograd/function.h"
#include "autograd/grad_mode.h"

namespace sg::autograd {

// What a Function's forward leaves for its backward.
class FunctionContext {
public:
  // Tensors backward needs. Saved with their storage version: modifying one in place before
  // backward makes saved_tensors() throw instead of giving a wrong gradient.
  void save_for_backward(const TensorList& tensors);
  TensorList saved_tensors() const;
  // Non-tensor values (a dim, a scale), by name; read back with std::any_cast<T>.
  std::map<std::string, std::any> saved_data;
  // One entry per forward argument: whether backward must compute that argument's gradient.
  const NeedsGrad& needs_input_grad() const { return needs_input_grad_; }

private:
  template <typename Op>
  friend struct Function;
  std::vector<SavedTensor> saved_;
  NeedsGrad needs_input_grad_;
};

namespace detail {

template <typename Arg>
Tensor tensor_or_undefined(const Arg& arg) {
  if constexpr (std::is_same_v<Arg, Tensor>) {
    return arg;
  } else {
    return Tensor();
  }
}

// The class name without its namespaces ("Cube" for sg::test::Cube).
std::string short_type_name(const std::type_info& type);

// Throws, naming the op, unless backward returned one gradient per forward argument, each
// undefined or of its input's shape.
// (std::nullopt marks a non-tensor argument.)
void check_backward_gradients(const std::string& node_name, const TensorList& gradients,
                              const std::vector<std::optional<Shape>>& input_shapes);

}  // namespace detail

template <typename Op>
struct Function {
  template <typename... Args>
  static Tensor apply(const Args&... args) {
    const TensorList inputs{detail::tensor_or_undefined(args)...};
    auto ctx = std::make_shared<FunctionContext>();
    for (const Tensor& input : inputs) ctx->needs_input_grad_.push_back(any_requires_grad({input}));
    Tensor out;
    {
      NoGradGuard no_grad;
      out = Op::forward(*ctx, args...);
    }
    SG_CHECK(out.defined(), node_name(), ": forward returned an undefined tensor");
    // An input returned as is gets a handle of its own, so recording this node as the output's
    // history leaves the input's history alone.
    for (const Tensor& input : inputs)
      if (out.is_same(input)) out = out.alias();
    // Backward checks its gradients against the inputs' shapes; the inputs themselves are not kept.
    std::vector<std::optional<Shape>> input_shapes;
    for (const Tensor& input : inputs)
      input_shapes.push_back(input.defined() ? std::optional<Shape>(input.sizes()) : std::nullopt);
    const std::string name = node_name();
    return record(name.c_str(), out, inputs, [ctx, name, input_shapes](const Tensor& grad_output, const NeedsGrad&) {
      TensorList gradients = Op::backward(*ctx, TensorList{grad_output});
      detail::check_backward_gradients(name, gradients, input_shapes);
      return gradients;
    });
  }

  static std::string node_name() {
    if constexpr (requires { Op::name; }) {
      return std::string(Op::name) + "Backward";
    } else {
      return detail::short_type_name(typeid(Op)) + "Backward";
    }
  }
};

}  // namespace sg::autograd
