// One cuDNN handle per GPU, and the descriptors the cuDNN calls describe tensors with.
#include "core/cuda/cudnn.h"

#include <array>
#include <limits>
#include <mutex>

#include "core/cuda_runtime/per_device.h"
#include "core/error.h"

namespace sg::cuda {

namespace detail {
void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  SG_FAIL("cuDNN error ", cudnnGetErrorString(status), " in ", call, " at ", file, ":", line);
}
}  // namespace detail

namespace {

struct HandleSlot {
  cudnnHandle_t handle = nullptr;
  std::mutex in_use;
};

HandleSlot& handle_slot(int device) {
  static auto* slots = new PerDevice<HandleSlot>("cuDNN");  // Note in core/cuda_runtime/per_device.h
  return slots->get(device, [] {
    auto* slot = new HandleSlot;
    SG_CUDNN_CHECK(cudnnCreate(&slot->handle));
    SG_CUDNN_CHECK(cudnnSetStream(slot->handle, compute_stream()));
    return slot;
  });
}

}  // namespace

CudnnHandle::CudnnHandle(int device)
    : guard_(device),
      lock_(handle_slot(device).in_use),
      handle_(handle_slot(device).handle) {}

cudnnDataType_t cudnn_data_type(DType dtype, const char* op_name) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  SG_FAIL(op_name, ": cuDNN takes f32, f64, f16 or bf16 tensors, got ", dtype);
}

int cudnn_int(int64_t value, const char* op_name) {
  SG_CHECK(value <= std::numeric_limits<int>::max(), op_name, ": size or stride ", value, " exceeds cuDNN's int range");
  return static_cast<int>(value);
}

TensorDescriptor::TensorDescriptor(DType dtype, const Shape& sizes, const Shape& strides, const char* op_name) {
  std::array<int, 4> dims{}, steps{};
  for (size_t d = 0; d < 4; ++d) {
    dims[d] = cudnn_int(sizes[d], op_name);
    steps[d] = cudnn_int(strides[d], op_name);
  }
  SG_CUDNN_CHECK(cudnnSetTensorNdDescriptor(get(), cudnn_data_type(dtype, op_name), 4, dims.data(), steps.data()));
}

FilterDescriptor::FilterDescriptor(DType dtype, const Shape& sizes, const char* op_name) {
  std::array<int, 4> dims{};
  for (size_t d = 0; d < 4; ++d) dims[d] = cudnn_int(sizes[d], op_name);
  SG_CUDNN_CHECK(cudnnSetFilterNdDescriptor(get(), cudnn_data_type(dtype, op_name), CUDNN_TENSOR_NCHW, 4, dims.data()));
}

ConvolutionDescriptor::ConvolutionDescriptor(int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w,
                                             int64_t dilation_h, int64_t dilation_w, int64_t groups,
                                             cudnnDataType_t compute) {
  const char* op = "conv2d";
  SG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      get(), cudnn_int(pad_h, op), cudnn_int(pad_w, op), cudnn_int(stride_h, op), cudnn_int(stride_w, op),
      cudnn_int(dilation_h, op), cudnn_int(dilation_w, op), CUDNN_CROSS_CORRELATION, compute));
  SG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(get(), cudnn_int(groups, op)));
}

}  // namespace sg::cuda
