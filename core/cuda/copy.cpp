// Copies that involve a GPU. A transfer between host and device (or between two GPUs) moves
// the bytes of one contiguous block with cudaMemcpy; whatever else the copy asks for (a dtype
// conversion, broadcasting, a strided destination) is done on one side by an ordinary copy
// kernel: on the GPU after an upload, on the CPU after a download.
#include "core/cpu/pointwise_kernels.h"  // defines: cpu::copy, the conversion on the host
#include "core/cuda/pointwise_kernels.h"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"

namespace sg::cuda {

namespace {

// A contiguous tensor shaped like `t`, with t's dtype, on `device`.
Tensor empty_like_on(const Tensor& t, Device device) {
  return Tensor(std::make_shared<TensorImpl>(std::make_shared<Storage>(t.numel() * t.element_size(), device), 0,
                                             t.sizes(), contiguous_strides(t.sizes()), t.dtype()));
}

// cudaMemcpy orders itself after the kernels queued on the legacy default stream (Note [One
// compute stream]) and returns once the bytes can be used: a download is complete, an upload
// has left the source buffer.
void transfer(const Tensor& to, const Tensor& from) {
  const size_t bytes = from.numel() * from.element_size();
  DeviceGuard guard(to.device().is_cuda() ? to.device().index : from.device().index);
  SG_CUDA_CHECK(cudaMemcpy(to.raw_data(), from.raw_data(), bytes, cudaMemcpyDefault));
}

// dst can receive src's bytes as they are: same dtype, same shape, contiguous.
bool takes_bytes_directly(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous();
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.device() == src.device()) return copy_on_device(dst, src);
  const Tensor packed = kernels::contiguous(src);
  if (takes_bytes_directly(dst, packed)) return transfer(dst, packed);
  // Land the bytes on dst's device first, then convert / broadcast / scatter there.
  const Tensor landed = empty_like_on(packed, dst.device());
  transfer(landed, packed);
  if (dst.device().is_cpu()) cpu::copy(dst, landed);
  else copy_on_device(dst, landed);
}

}  // namespace sg::cuda
