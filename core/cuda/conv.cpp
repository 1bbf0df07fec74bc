// The CUDA convolutions: one cuDNN call each (cudnnConvolutionForward, ...BackwardData,
// ...BackwardFilter), on contiguous NCHW tensors, with the algorithm picked by cuDNN's
// heuristics (the _v7 queries) once per shape and its workspace taken from the caching allocator.
#include <array>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/conv_kernels.h"
#include "core/cuda/cudnn.h"
#include "core/cuda_runtime/runtime.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cuda {

namespace {

// Note [Choosing a cuDNN convolution algorithm]
// The _v7 heuristics rank the algorithms that fit the shapes without running them (the Find
// functions would time each one on the GPU at every new shape). We take the best-ranked one that
// is deterministic — the same inputs then give the same bits, as on the CPU (docs/tensor.md,
// Threads and determinism) — and computes the sum directly: the FFT and Winograd algorithms
// transform the operands first and give up digits for speed (in f32 the Fashion-MNIST CNN's
// weights drifted 1e-3 relative from the CPU's in three training steps, where the CPU stays within
// 1e-7 of its f64 answer). Failing that we take a deterministic transform, and only when none is
// deterministic the best-ranked one at all. Math: 16-bit
// inputs may use tensor cores (f32 accumulation either way); f32 uses plain FMA unless TF32 is
// allowed (cuda::set_allow_tf32), even where the heuristic proposed a tensor-core variant, as
// PyTorch does.
struct Algorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace_bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

cudnnMathType_t requested_math(DType dtype) {
  if (dtype == DType::f16 || dtype == DType::bf16) return CUDNN_TENSOR_OP_MATH;
  if (dtype == DType::f32 && !allow_tf32()) return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

// `ranked` lists `count` results of a _v7 query; workspace_size(algo, &bytes) asks the matching
// Get*WorkspaceSize. Sets the convolution's math type to the chosen algorithm's.
bool is_transform(cudnnConvolutionFwdAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdDataAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdFilterAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

template <typename Perf, typename WorkspaceSize>
Algorithm choose(const Perf* ranked, int count, cudnnConvolutionDescriptor_t conv, DType dtype,
                 const WorkspaceSize& workspace_size, const char* op_name) {
  struct Demand {
    bool deterministic, direct;
  };
  for (const Demand demand : {Demand{true, true}, Demand{true, false}, Demand{false, false}}) {
    for (int i = 0; i < count; ++i) {
      const Perf& perf = ranked[i];
      if (perf.status != CUDNN_STATUS_SUCCESS) continue;
      if (demand.deterministic && perf.determinism != CUDNN_DETERMINISTIC) continue;
      if (demand.direct && is_transform(perf.algo)) continue;
      const cudnnMathType_t math = dtype == DType::f32 && !allow_tf32() ? CUDNN_FMA_MATH : perf.mathType;
      SG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
      size_t bytes = 0;
      if (workspace_size(perf.algo, &bytes) == CUDNN_STATUS_SUCCESS) return {static_cast<int>(perf.algo), bytes, math};
    }
  }
  SG_FAIL(op_name, ": cuDNN has no algorithm for these shapes and dtype ", dtype);
}

// Note [Caching the chosen convolution algorithm]
// cuDNN 9 answers the _v7 queries through its graph API's heuristics, which costs about a
// millisecond of host time per call: more than most convolutions take on the GPU. A training step
// repeats the same few shapes, so the choice is made once per shape, direction, dtype, device and
// TF32 setting and kept for the life of the process (PyTorch keeps a cache of the same kind).
enum class Direction { forward, grad_input, grad_weight };

using AlgorithmKey = std::vector<int64_t>;

AlgorithmKey algorithm_key(Direction direction, const Shape& input, const Shape& weight, const Shape& out, DType dtype,
                           const Conv2dParams& params, int device) {
  AlgorithmKey key{static_cast<int64_t>(direction), device, static_cast<int64_t>(dtype), allow_tf32() ? 1 : 0};
  for (const Shape* shape : {&input, &weight, &out}) key.insert(key.end(), shape->begin(), shape->end());
  key.insert(key.end(), {params.padding.h, params.padding.w, params.stride.h, params.stride.w, params.dilation.h,
                         params.dilation.w, params.groups});
  return key;
}

// The algorithm cached under `key`, or `query()`'s answer, cached.
template <typename Query>
Algorithm cached_algorithm(const AlgorithmKey& key, const Query& query) {
  static std::mutex mutex;
  static auto* chosen = new std::map<AlgorithmKey, Algorithm>;  // never destroyed: used until exit
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = chosen->find(key); found != chosen->end()) return found->second;
  }
  const Algorithm algorithm = query();
  const std::lock_guard<std::mutex> lock(mutex);
  return chosen->emplace(key, algorithm).first->second;
}

// Everything a convolution call describes: input [N, C, H, W], weight [K, C / G, R, S], out
// [N, K, P, Q] (or their gradients), all contiguous, one dtype.
struct ConvCall {
  TensorDescriptor input, out;
  FilterDescriptor weight;
  ConvolutionDescriptor conv;
  DType dtype;

  ConvCall(const Shape& input_shape, const Shape& weight_shape, const Shape& out_shape, DType dtype,
           const Conv2dParams& params, const char* op_name)
      : input(dtype, input_shape, contiguous_strides(input_shape), op_name),
        out(dtype, out_shape, contiguous_strides(out_shape), op_name),
        weight(dtype, weight_shape, op_name),
        conv(params.padding.h, params.padding.w, params.stride.h, params.stride.w, params.dilation.h, params.dilation.w,
             params.groups, dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
        dtype(dtype) {
    SG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), requested_math(dtype)));
    std::array<int, 4> expected{};
    SG_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv.get(), input.get(), weight.get(), &expected[0],
                                                         &expected[1], &expected[2], &expected[3]));
    for (size_t d = 0; d < 4; ++d)
      SG_CHECK(expected[d] == out_shape[d], op_name, ": cuDNN computes an output of shape [", expected[0], ", ",
               expected[1], ", ", expected[2], ", ", expected[3], "] where the front expects ", shape_str(out_shape));
  }
};

// The scaling factors cuDNN blends with (result = alpha * op + beta * result): double for f64
// tensors, float for the others.
struct Blend {
  double alpha_f64, beta_f64;
  float alpha_f32, beta_f32;
  bool is_f64;
  Blend(DType dtype, double beta)
      : alpha_f64(1),
        beta_f64(beta),
        alpha_f32(1),
        beta_f32(static_cast<float>(beta)),
        is_f64(dtype == DType::f64) {}
  const void* alpha() const { return is_f64 ? static_cast<const void*>(&alpha_f64) : &alpha_f32; }
  const void* beta() const { return is_f64 ? static_cast<const void*>(&beta_f64) : &beta_f32; }
};

Tensor workspace(size_t bytes, Device device) { return empty({static_cast<int64_t>(bytes)}, {DType::u8, device}); }

void check_written(const Tensor& written, const char* op_name) {
  SG_CHECK(written.is_contiguous(), op_name, ": the kernel writes contiguous outputs, got strides ",
           shape_str(written.strides()));
}

}  // namespace

void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params) {
  check_written(out, "conv2d");
  if (out.numel() == 0) return;
  // The bias is written first and the convolution blended onto it (beta = 1), so a 16-bit out
  // is rounded once, as on the CPU.
  if (bias.defined()) {
    const int64_t K = bias.size(0);
    kernels::copy(out,
                  Tensor(std::make_shared<TensorImpl>(bias.storage(), bias.storage_offset(), Shape{1, K, 1, 1},
                                                      Shape{K * bias.stride(0), bias.stride(0), 1, 1}, bias.dtype())));
  }
  if (weight.numel() == 0) {  // no input channels per group: an empty sum
    if (!bias.defined()) kernels::fill(out, 0.0);
    return;
  }
  const Tensor x = kernels::contiguous(input), w = kernels::contiguous(weight);
  ConvCall call(x.sizes(), w.sizes(), out.sizes(), out.dtype(), params, "conv2d");
  const Blend blend(out.dtype(), bias.defined() ? 1.0 : 0.0);
  CudnnHandle handle(out.device().index);
  const auto query = [&] {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> ranked{};
    int count = 0;
    SG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle.get(), call.input.get(), call.weight.get(),
                                                          call.conv.get(), call.out.get(), int(ranked.size()), &count,
                                                          ranked.data()));
    return choose(
        ranked.data(), count, call.conv.get(), call.dtype,
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(handle.get(), call.input.get(), call.weight.get(),
                                                         call.conv.get(), call.out.get(), algo, bytes);
        },
        "conv2d");
  };
  const Algorithm chosen = cached_algorithm(
      algorithm_key(Direction::forward, x.sizes(), w.sizes(), out.sizes(), out.dtype(), params, out.device().index),
      query);
  SG_CUDNN_CHECK(cudnnSetConvolutionMathType(call.conv.get(), chosen.math));
  const Tensor space = workspace(chosen.workspace_bytes, out.device());
  SG_CUDNN_CHECK(cudnnConvolutionForward(handle.get(), blend.alpha(), call.input.get(), x.raw_data(), call.weight.get(),
                                         w.raw_data(), call.conv.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(chosen.algo), space.raw_data(),
                                         chosen.workspace_bytes, blend.beta(), call.out.get(), out.raw_data()));
}

void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params) {
  check_written(grad_input, "conv2d_grad_input");
  if (grad_input.numel() == 0) return;
  if (grad_out.numel() == 0) return kernels::fill(grad_input, 0.0);  // no output channels: an empty sum
  const Tensor dy = kernels::contiguous(grad_out), w = kernels::contiguous(weight);
  ConvCall call(grad_input.sizes(), w.sizes(), dy.sizes(), grad_input.dtype(), params, "conv2d_grad_input");
  const Blend blend(grad_input.dtype(), 0.0);
  CudnnHandle handle(grad_input.device().index);
  const auto query = [&] {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> ranked{};
    int count = 0;
    SG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle.get(), call.weight.get(), call.out.get(),
                                                               call.conv.get(), call.input.get(), int(ranked.size()),
                                                               &count, ranked.data()));
    return choose(
        ranked.data(), count, call.conv.get(), call.dtype,
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle.get(), call.weight.get(), call.out.get(),
                                                              call.conv.get(), call.input.get(), algo, bytes);
        },
        "conv2d_grad_input");
  };
  const Algorithm chosen =
      cached_algorithm(algorithm_key(Direction::grad_input, grad_input.sizes(), w.sizes(), dy.sizes(),
                                     grad_input.dtype(), params, grad_input.device().index),
                       query);
  SG_CUDNN_CHECK(cudnnSetConvolutionMathType(call.conv.get(), chosen.math));
  const Tensor space = workspace(chosen.workspace_bytes, grad_input.device());
  SG_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle.get(), blend.alpha(), call.weight.get(), w.raw_data(), call.out.get(), dy.raw_data(), call.conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(chosen.algo), space.raw_data(), chosen.workspace_bytes, blend.beta(),
      call.input.get(), grad_input.raw_data()));
}

void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params) {
  check_written(grad_weight, "conv2d_grad_weight");
  if (grad_weight.numel() == 0) return;
  if (grad_out.numel() == 0) return kernels::fill(grad_weight, 0.0);  // no images: an empty sum
  const Tensor dy = kernels::contiguous(grad_out), x = kernels::contiguous(input);
  ConvCall call(x.sizes(), grad_weight.sizes(), dy.sizes(), grad_weight.dtype(), params, "conv2d_grad_weight");
  const Blend blend(grad_weight.dtype(), 0.0);
  CudnnHandle handle(grad_weight.device().index);
  const auto query = [&] {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> ranked{};
    int count = 0;
    SG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle.get(), call.input.get(), call.out.get(),
                                                                 call.conv.get(), call.weight.get(), int(ranked.size()),
                                                                 &count, ranked.data()));
    return choose(
        ranked.data(), count, call.conv.get(), call.dtype,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle.get(), call.input.get(), call.out.get(),
                                                                call.conv.get(), call.weight.get(), algo, bytes);
        },
        "conv2d_grad_weight");
  };
  const Algorithm chosen =
      cached_algorithm(algorithm_key(Direction::grad_weight, x.sizes(), grad_weight.sizes(), dy.sizes(),
                                     grad_weight.dtype(), params, grad_weight.device().index),
                       query);
  SG_CUDNN_CHECK(cudnnSetConvolutionMathType(call.conv.get(), chosen.math));
  const Tensor space = workspace(chosen.workspace_bytes, grad_weight.device());
  SG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle.get(), blend.alpha(), call.input.get(), x.raw_data(), call.out.get(), dy.raw_data(), call.conv.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(chosen.algo), space.raw_data(), chosen.workspace_bytes, blend.beta(),
      call.weight.get(), grad_weight.raw_data()));
}

}  // namespace sg::cuda
