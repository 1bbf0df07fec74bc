// Tensor::str and operator<<: a tensor prints as PyTorch prints it (torch/_tensor_str.py with
// the default print options), followed by its size, dtype and device, which syncgrad always
// shows, and its autograd state. This file lives in autograd/ because naming the grad_fn needs
// autograd::Node.
//
//   tensor([[ 0.1234, -1.5000],
//           [ 2.0000,  3.0000]], size=[2, 2], dtype=f32, device=cpu, grad_fn=<MulBackward>)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace sg {

namespace {

// torch.set_printoptions(profile="default").
constexpr int kPrecision = 4;         // digits after the decimal point
constexpr int64_t kThreshold = 1000;  // tensors with more elements are summarised...
constexpr int64_t kEdgeItems = 3;     // ...to this many items at each end of every dim
constexpr int64_t kLineWidth = 80;
constexpr int64_t kPrefixLength = 7;  // "tensor("

// The element at `offset` (counted in elements from the start of the storage), widened to T:
// double for floating dtypes, int64 for integers and bool.
template <typename T>
T load(const Tensor& t, int64_t offset) {
  return SG_DISPATCH_ALL(t.dtype(), "print", [&]<typename scalar_t>() {
    const scalar_t value = static_cast<const scalar_t*>(t.storage()->data())[offset];
    return static_cast<T>(static_cast<opmath_t<scalar_t>>(value));
  });
}

// Python's spelling of a non-finite float ("nan" whatever its sign bit, "inf", "-inf").
std::string nonfinite_text(double value) {
  if (std::isnan(value)) return "nan";
  return value < 0 ? "-inf" : "inf";
}

// printf's %.{digits}f or %.{digits}e, which round exactly as Python's format() does.
std::string printf_text(const char* format, int digits, double value) {
  if (!std::isfinite(value)) return nonfinite_text(value);
  char buffer[512];  // %.4f of the largest double needs 314 characters
  std::snprintf(buffer, sizeof(buffer), format, digits, value);
  return buffer;
}
std::string fixed_text(double value, int digits) { return printf_text("%.*f", digits, value); }
std::string scientific_text(double value) { return printf_text("%.*e", kPrecision, value); }

// The indices of a dim of `size` that are printed: all, or the edge items when summarising.
std::vector<int64_t> shown_indices(int64_t size, bool summarize) {
  if (summarize && size > 2 * kEdgeItems) {
    std::vector<int64_t> indices;
    for (int64_t i = 0; i < kEdgeItems; ++i) indices.push_back(i);
    for (int64_t i = size - kEdgeItems; i < size; ++i) indices.push_back(i);
    return indices;
  }
  std::vector<int64_t> indices(size);
  std::iota(indices.begin(), indices.end(), 0);
  return indices;
}

// PyTorch's _Formatter: one style and one width for every printed element, chosen from the
// values that are shown. Floats print with 4 decimals; integral floats as "3."; scientific
// notation when the nonzero magnitudes span more than 1000x, exceed 1e8, or (for non-integral
// values) fall below 1e-4. Integer dtypes print as integers, bool as True/False.
class Formatter {
public:
  Formatter(const Tensor& t, const std::vector<int64_t>& offsets) : t_(t), floating_(is_floating(t.dtype())) {
    if (!floating_) {
      for (int64_t offset : offsets) width_ = std::max(width_, integer_text(offset).size());
      return;
    }
    std::vector<double> nonzero_finite;
    for (int64_t offset : offsets) {
      const double value = load<double>(t, offset);
      if (std::isfinite(value) && value != 0) nonzero_finite.push_back(value);
    }
    if (nonzero_finite.empty()) return;
    double max_abs = 0, min_abs = INFINITY;
    for (double value : nonzero_finite) {
      max_abs = std::max(max_abs, std::abs(value));
      min_abs = std::min(min_abs, std::abs(value));
      int_mode_ = int_mode_ && value == std::ceil(value);
    }
    sci_mode_ = max_abs / min_abs > 1000.0 || max_abs > 1.0e8 || (!int_mode_ && min_abs < 1.0e-4);
    for (double value : nonzero_finite) {
      // In int mode the "." that marks a float is added below, so it counts towards the width.
      const size_t length = sci_mode_   ? scientific_text(value).size()
                            : int_mode_ ? fixed_text(value, 0).size() + 1
                                        : fixed_text(value, kPrecision).size();
      width_ = std::max(width_, length);
    }
  }

  size_t width() const { return width_; }

  // The element at `offset`, right-aligned to width().
  std::string format(int64_t offset) const {
    std::string text;
    if (!floating_) {
      text = integer_text(offset);
    } else {
      const double value = load<double>(t_, offset);
      if (sci_mode_) text = scientific_text(value);
      else if (int_mode_) text = fixed_text(value, 0) + (std::isfinite(value) ? "." : "");
      else text = fixed_text(value, kPrecision);
    }
    return std::string(width_ > text.size() ? width_ - text.size() : 0, ' ') + text;
  }

private:
  std::string integer_text(int64_t offset) const {
    const int64_t value = load<int64_t>(t_, offset);
    if (t_.dtype() == DType::boolean) return value ? "True" : "False";
    return std::to_string(value);
  }

  const Tensor& t_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// Walks the printed elements of a tensor in row-major order, building the nested brackets.
class DataPrinter {
public:
  explicit DataPrinter(const Tensor& t) : t_(t), summarize_(t.numel() > kThreshold), formatter_(t, shown_offsets()) {}

  // The bracketed data; `indent` is the column the opening bracket sits in.
  std::string str(int64_t indent) const {
    if (t_.numel() == 0) return "[]";
    if (t_.dim() == 0) return formatter_.format(t_.storage_offset());
    return nested(0, t_.storage_offset(), indent);
  }

private:
  std::vector<int64_t> shown_offsets() const {
    std::vector<int64_t> offsets;
    collect_offsets(0, t_.storage_offset(), offsets);
    return offsets;
  }

  void collect_offsets(int64_t dim, int64_t offset, std::vector<int64_t>& offsets) const {
    if (dim == t_.dim()) {
      offsets.push_back(offset);
      return;
    }
    for (int64_t i : shown_indices(t_.size(dim), summarize_))
      collect_offsets(dim + 1, offset + i * t_.stride(dim), offsets);
  }

  // The items of `dim` at `offset` (sub-tensors, or elements for the last dim), with "..."
  // where a summary skips some.
  template <typename ItemText>
  std::vector<std::string> items(int64_t dim, const std::string& ellipsis, ItemText item_text) const {
    std::vector<std::string> result;
    const std::vector<int64_t> indices = shown_indices(t_.size(dim), summarize_);
    for (size_t k = 0; k < indices.size(); ++k) {
      if (k > 0 && indices[k] != indices[k - 1] + 1) result.push_back(ellipsis);
      result.push_back(item_text(indices[k]));
    }
    return result;
  }

  static std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string result;
    for (size_t k = 0; k < parts.size(); ++k) result += (k ? separator : "") + parts[k];
    return result;
  }

  // (Appending rather than "[" + inner also avoids a GCC 12 -Wrestrict false positive.)
  static std::string bracketed(const std::string& inner) { return std::string("[").append(inner).append("]"); }

  std::string nested(int64_t dim, int64_t offset, int64_t indent) const {
    const std::string continuation(static_cast<size_t>(indent + 1), ' ');
    if (dim == t_.dim() - 1) {
      // The last dim: as many elements per line as fit in the line width.
      const auto elements =
          items(dim, " ...", [&](int64_t i) { return formatter_.format(offset + i * t_.stride(dim)); });
      const int64_t element_length = static_cast<int64_t>(formatter_.width()) + 2;  // with ", "
      const size_t per_line = static_cast<size_t>(std::max<int64_t>(1, (kLineWidth - indent) / element_length));
      std::vector<std::string> lines;
      for (size_t start = 0; start < elements.size(); start += per_line) {
        const size_t end = std::min(elements.size(), start + per_line);
        lines.push_back(join(std::vector<std::string>(elements.begin() + start, elements.begin() + end), ", "));
      }
      return bracketed(join(lines, std::string(",\n") + continuation));
    }
    // Outer dims: one sub-tensor per line, separated by one blank line per dim below the next.
    const auto slices =
        items(dim, "...", [&](int64_t i) { return nested(dim + 1, offset + i * t_.stride(dim), indent + 1); });
    const std::string blank_lines(static_cast<size_t>(t_.dim() - dim - 1), '\n');
    return bracketed(join(slices, std::string(",") + blank_lines + continuation));
  }

  const Tensor& t_;
  bool summarize_;
  Formatter formatter_;
};

// Appends ", suffix" to `text`, starting a new line (indented under the data) when the suffix
// would carry the line past the line width — PyTorch's _add_suffixes.
void append_suffix(std::string& text, const std::string& suffix) {
  const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  const auto line_length = static_cast<int64_t>(text.size() - line_start);
  if (line_length + 2 + static_cast<int64_t>(suffix.size()) > kLineWidth)
    text += ",\n" + std::string(kPrefixLength, ' ') + suffix;
  else text += ", " + suffix;
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  NoGradGuard no_grad;  // reading the values must not record anything
  const Tensor host = to(Device::cpu());
  std::string text = "tensor(" + DataPrinter(host).str(kPrefixLength);
  append_suffix(text, "size=" + shape_str(sizes()));
  append_suffix(text, std::string("dtype=") + dtype_name(dtype()));
  append_suffix(text, "device=" + device().str());
  if (const auto node = grad_fn()) append_suffix(text, "grad_fn=<" + node->name() + ">");
  else if (requires_grad()) append_suffix(text, "requires_grad=True");
  return text + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

}  // namespace sg
