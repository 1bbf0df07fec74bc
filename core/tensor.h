#pragma once
// defines: Tensor — a cheap shared handle to a TensorImpl, with PyTorch-shaped methods.
//
// Note [Where Tensor methods are defined]
// The structural accessors below (sizes, dtype, data_ptr, ...) are implemented in core/.
// The op methods (x.sum(), x.reshape(...), x + y) are thin forwards to the differentiable
// free functions of autograd/ (autograd/tensor_methods.cpp), exactly like PyTorch's
// generated TensorBody. core/ never includes an autograd header; the methods are only
// declared here so users can write `x.matmul(w).relu().sum()`.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor_impl.h"

namespace sg {

namespace autograd {
class Node;
}

class Tensor {
public:
  Tensor() = default;  // undefined: holds no data (like an empty grad)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- structure (core/tensor.cpp) ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  int64_t size(int64_t dim) const;
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  int64_t storage_offset() const;
  bool is_contiguous() const;
  size_t element_size() const { return itemsize(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Pointer to the first element; the typed form checks that T matches the dtype.
  void* raw_data() const;
  template <typename T>
  T* data_ptr() const;
  // The value of a one-element tensor, converted to T.
  template <typename T>
  T item() const;
  double item() const { return item<double>(); }
  std::string str() const;  // PyTorch-style printout (autograd/print.cpp: it names the grad_fn)

  // A new handle on the same storage and shape, with no autograd history.
  Tensor alias() const;
  // Makes this tensor (every handle to it) use other's storage, layout and dtype, keeping its
  // own autograd identity — PyTorch's `param.data = ...`, used by Module::to(dtype).
  void set_data(const Tensor& other);

  // ---- autograd (autograd/tensor_autograd.cpp) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  const Tensor& grad() const;  // undefined until a backward reaches this leaf
  Tensor& mutable_grad();
  void set_grad(const Tensor& grad);
  std::shared_ptr<autograd::Node> grad_fn() const;
  bool is_leaf() const;
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same data, no history
  Tensor& detach_();
  void retain_grad();  // keep .grad on a non-leaf
  // Runs on the gradient flowing into this tensor; may return a replacement (or undefined to keep it).
  void register_hook(std::function<Tensor(const Tensor&)> hook);
  // Leaves only: runs after backward has accumulated into .grad (DDP starts bucket all-reduces here).
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);

  // ---- shape and views (autograd/ops_shape.cpp) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor expand_as(const Tensor& other) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor& copy_(const Tensor& src);  // broadcasts and converts src into this tensor

  // ---- pointwise (autograd/ops_pointwise.cpp) ----
  Tensor add(const Tensor& other, double alpha = 1.0) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(double exponent) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  // In place: write into this tensor's storage (autograd records them; see ops_pointwise.h).
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double other);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double other);
  Tensor& clamp_(std::optional<double> min, std::optional<double> max);
  Tensor& masked_fill_(const Tensor& mask, double value);
  Tensor& relu_();
  Tensor& fill_(double value);
  Tensor& zero_();

  // ---- reductions (autograd/ops_reduce.cpp); empty dims = all dims ----
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor max() const;  // over all elements
  Tensor min() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // values, indices
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor norm(double p = 2.0, const Shape& dims = {}, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;

  // ---- indexing (autograd/ops_index.cpp) ----
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // ---- sorting (autograd/ops_sort.cpp); (values, indices) as torch.sort / topk ----
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, bool stable = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = false) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;

  // ---- linear algebra (autograd/ops_linalg.cpp) ----
  Tensor matmul(const Tensor& other) const;

private:
  std::shared_ptr<TensorImpl> impl_;
};

using TensorList = std::vector<Tensor>;

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// Operators forward to the free functions in autograd/ops_pointwise.h.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);

// ---- template definitions ----
template <typename T>
T* Tensor::data_ptr() const {
  SG_CHECK(defined(), "data_ptr: tensor is undefined");
  SG_CHECK(dtype_of<T>() == dtype(), "data_ptr: requested ", dtype_of<T>(), " but the tensor is ", dtype());
  return static_cast<T*>(raw_data());
}

}  // namespace sg
