#pragma once
// defines: cuda::CudnnHandle, SG_CUDNN_CHECK, cudnn_data_type and RAII descriptors (tensor,
//          filter, convolution) — what the cuDNN convolutions (core/cuda/conv.cpp) and batch
//          norm (core/cuda/batch_norm.cpp) share. Included by core/cuda/ sources and by
//          bench/cudnn_algorithms.cpp, which calls cuDNN the way the library does.
//
// cuDNN 9 still carries the legacy API (cudnnConvolutionForward, cudnnBatchNormalization*)
// beside its graph API; it is marked deprecated but warns only under CUDNN_WARN_DEPRECATED.
// The legacy calls are what is used here: a reader can follow one call per operation.
#include <cudnn.h>

#include <mutex>

#include "core/cuda_runtime/stream.h"
#include "core/tensor.h"

namespace sg::cuda {

namespace detail {
// Throws sg::Error "cuDNN error <text> in <call> at <file>:<line>".
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace sg::cuda

#define SG_CUDNN_CHECK(call)                                                             \
  do {                                                                                   \
    const cudnnStatus_t sg_cudnn_status = (call);                                        \
    if (sg_cudnn_status != CUDNN_STATUS_SUCCESS)                                         \
      ::sg::cuda::detail::throw_cudnn_error(sg_cudnn_status, #call, __FILE__, __LINE__); \
  } while (0)

namespace sg::cuda {

// The cuDNN handle of GPU `device` (created on first use, bound to compute_stream(), never
// destroyed), with that device current and the handle to itself while this object lives: a
// cuDNN handle must not be used by two host threads at once.
class CudnnHandle {
public:
  explicit CudnnHandle(int device);
  cudnnHandle_t get() const { return handle_; }

private:
  DeviceGuard guard_;
  std::unique_lock<std::mutex> lock_;
  cudnnHandle_t handle_ = nullptr;
};

// f32, f64, f16, bf16; any other dtype is an error naming `op_name`.
cudnnDataType_t cudnn_data_type(DType dtype, const char* op_name);

// cuDNN takes sizes and strides as int: a larger tensor is an error naming `op_name`.
int cudnn_int(int64_t value, const char* op_name);

// Owns one cuDNN descriptor: created in the constructor, destroyed in the destructor.
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class Descriptor {
public:
  Descriptor() { SG_CUDNN_CHECK(Create(&descriptor_)); }
  ~Descriptor() { Destroy(descriptor_); }  // cannot fail for a descriptor Create made
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Handle get() const { return descriptor_; }

private:
  Handle descriptor_ = nullptr;
};

// A 4-D tensor: `sizes` with `strides`, in `dtype`. Default-constructed: unset, for
// cudnnDeriveBNTensorDescriptor to fill.
class TensorDescriptor
    : public Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
public:
  TensorDescriptor() = default;
  TensorDescriptor(DType dtype, const Shape& sizes, const Shape& strides, const char* op_name);
};

// A convolution weight [K, C / G, R, S], contiguous.
class FilterDescriptor
    : public Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
public:
  FilterDescriptor(DType dtype, const Shape& sizes, const char* op_name);
};

class ConvolutionDescriptor : public Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                                cudnnDestroyConvolutionDescriptor> {
public:
  // Cross-correlation (what deep learning calls convolution) with the given geometry and groups,
  // accumulating in `compute` (CUDNN_DATA_FLOAT for f16/bf16/f32, DOUBLE for f64).
  ConvolutionDescriptor(int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w, int64_t dilation_h,
                        int64_t dilation_w, int64_t groups, cudnnDataType_t compute);
};

}  // namespace sg::cuda
