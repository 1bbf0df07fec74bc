// Every cuDNN algorithm for one convolution, in each direction (forward, input gradient, weight
// gradient), dtype and math type: its GPU time and its error against the float64 sum rounded once to
// the dtype (what the CPU computes), measured as tests/cuda measures it: max |got - want| / (|want| + 1).
// cuDNN's heuristics rank the algorithms by speed alone; this shows what each one gives up, and which
// one core/cuda/conv.cpp's rule (Note [Choosing a cuDNN convolution algorithm]) lands on is the first
// deterministic, direct one in the heuristics' list printed above each table.
//
//   ./build-gpu/bench/bench_cudnn_algorithms [--shape N,C,H,W,K,R,S,PAD]      # f16, bf16 and f32
// The default shape is the Fashion-MNIST CNN's second convolution at a small batch: [6, 32, 14, 14] by
// [64, 32, 5, 5], padding 2. Without a usable GPU it says why and exits 0.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/cuda/cudnn.h"
#include "parse_list.h"
#include "syncgrad.h"

namespace {

constexpr const char* kName = "bench_cudnn_algorithms";

struct Shape {
  int64_t N, C, H, W, K, R, S, pad;
  int64_t P() const { return H + 2 * pad - R + 1; }
  int64_t Q() const { return W + 2 * pad - S + 1; }
};

const char* math_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-conv";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "?";
}

// The descriptors of one convolution in one dtype (core/cuda/cudnn.h's, as the library's own
// convolutions make them): contiguous NCHW, f32 accumulation for every 16-bit dtype.
struct Descriptors {
  sg::cuda::TensorDescriptor input, out;
  sg::cuda::FilterDescriptor weight;
  sg::cuda::ConvolutionDescriptor conv;
  Descriptors(const sg::Shape& input_shape, const sg::Shape& weight_shape, const sg::Shape& out_shape, int64_t pad,
              sg::DType dtype)
      : input(dtype, input_shape, sg::contiguous_strides(input_shape), kName),
        out(dtype, out_shape, sg::contiguous_strides(out_shape), kName),
        weight(dtype, weight_shape, kName),
        conv(pad, pad, 1, 1, 1, 1, 1, CUDNN_DATA_FLOAT) {}
};

double error_against(const sg::Tensor& got, const sg::Tensor& want) {
  const sg::Tensor g = got.to(sg::Device::cpu()).to(sg::DType::f64), w = want.to(sg::DType::f64);
  return ((g - w).abs() / (w.abs() + 1.0)).max().item();
}

// One direction: its heuristics' ranking, then every algorithm's status, time and error.
struct Direction {
  const char* name;
  int algorithm_count;
  std::function<std::string()> ranking;                     // the _v7 list, one "algo/det/math" per entry
  std::function<cudnnStatus_t(int, void*, size_t)> launch;  // runs algorithm i with a workspace
  sg::Tensor result, want;                                  // written by launch; its float64 answer, rounded
};

void measure(Direction& direction, const sg::cuda::ConvolutionDescriptor& conv, const sg::Tensor& space) {
  for (const cudnnMathType_t math : {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_FMA_MATH}) {
    SG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
    std::printf("  %s, math %s; heuristics: %s\n", direction.name, math_name(math), direction.ranking().c_str());
    for (int algo = 0; algo < direction.algorithm_count; ++algo) {
      const size_t bytes = static_cast<size_t>(space.numel());
      const cudnnStatus_t status = direction.launch(algo, space.raw_data(), bytes);
      if (status != CUDNN_STATUS_SUCCESS) {
        std::printf("    algo %d: %s\n", algo, cudnnGetErrorString(status));
        continue;
      }
      sg::cuda::Event start(true), stop(true);
      start.record();
      for (int i = 0; i < 10; ++i) direction.launch(algo, space.raw_data(), bytes);
      stop.record();
      stop.synchronize();
      std::printf("    algo %d: %8.4f ms  error %.3g\n", algo, start.elapsed_ms(stop) / 10,
                  error_against(direction.result, direction.want));
    }
  }
}

void run(const Shape& s, sg::DType dtype) {
  const sg::Device gpu = sg::Device::cuda(0);
  // Inputs rounded to the dtype first, so the float64 answer is the exact sum of what the GPU reads.
  const sg::TensorOptions f64{sg::DType::f64};
  sg::Tensor x = sg::randn({s.N, s.C, s.H, s.W}, f64).to(dtype).to(sg::DType::f64);
  sg::Tensor w = sg::randn({s.K, s.C, s.R, s.S}, f64).to(dtype).to(sg::DType::f64);
  const sg::Tensor dy = sg::randn({s.N, s.K, s.P(), s.Q()}, f64).to(dtype).to(sg::DType::f64);
  x.requires_grad_();
  w.requires_grad_();
  const sg::Tensor y = sg::conv2d(x, w, sg::Tensor(), 1, s.pad);
  y.backward(dy);
  const sg::Tensor x_gpu = x.detach().to(dtype).to(gpu), w_gpu = w.detach().to(dtype).to(gpu);
  const sg::Tensor dy_gpu = dy.to(dtype).to(gpu);
  const sg::Tensor y_out = sg::empty(y.sizes(), {dtype, gpu}), dx_out = sg::empty(x.sizes(), {dtype, gpu});
  const sg::Tensor dw_out = sg::empty(w.sizes(), {dtype, gpu});
  const sg::Tensor space = sg::empty({int64_t{1} << 28}, {sg::DType::u8, gpu});

  // The library's handle of this GPU, on its compute stream, where the events below are recorded.
  const sg::cuda::CudnnHandle cudnn(gpu.index);
  const cudnnHandle_t handle = cudnn.get();
  const Descriptors d({s.N, s.C, s.H, s.W}, {s.K, s.C, s.R, s.S}, {s.N, s.K, s.P(), s.Q()}, s.pad, dtype);
  const float alpha = 1, beta = 0;
  const auto ranked = [](const auto* perf, int count) {
    std::string text;
    for (int i = 0; i < count; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS)
        text += std::to_string(perf[i].algo) + (perf[i].determinism == CUDNN_DETERMINISTIC ? "/det/" : "/nondet/") +
                math_name(perf[i].mathType) + " ";
    return text;
  };
  std::vector<Direction> directions;
  directions.push_back({"forward", CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                        [&] {
                          cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
                          int count = 0;
                          SG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                              handle, d.input.get(), d.weight.get(), d.conv.get(), d.out.get(),
                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
                          return ranked(perf, count);
                        },
                        [&](int algo, void* space_ptr, size_t bytes) {
                          return cudnnConvolutionForward(handle, &alpha, d.input.get(), x_gpu.raw_data(),
                                                         d.weight.get(), w_gpu.raw_data(), d.conv.get(),
                                                         cudnnConvolutionFwdAlgo_t(algo), space_ptr, bytes, &beta,
                                                         d.out.get(), y_out.raw_data());
                        },
                        y_out, y.detach().to(dtype)});
  directions.push_back({"input gradient", CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                        [&] {
                          cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
                          int count = 0;
                          SG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                              handle, d.weight.get(), d.out.get(), d.conv.get(), d.input.get(),
                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
                          return ranked(perf, count);
                        },
                        [&](int algo, void* space_ptr, size_t bytes) {
                          return cudnnConvolutionBackwardData(handle, &alpha, d.weight.get(), w_gpu.raw_data(),
                                                              d.out.get(), dy_gpu.raw_data(), d.conv.get(),
                                                              cudnnConvolutionBwdDataAlgo_t(algo), space_ptr, bytes,
                                                              &beta, d.input.get(), dx_out.raw_data());
                        },
                        dx_out, x.grad().to(dtype)});
  directions.push_back({"weight gradient", CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                        [&] {
                          cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
                          int count = 0;
                          SG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                              handle, d.input.get(), d.out.get(), d.conv.get(), d.weight.get(),
                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
                          return ranked(perf, count);
                        },
                        [&](int algo, void* space_ptr, size_t bytes) {
                          return cudnnConvolutionBackwardFilter(handle, &alpha, d.input.get(), x_gpu.raw_data(),
                                                                d.out.get(), dy_gpu.raw_data(), d.conv.get(),
                                                                cudnnConvolutionBwdFilterAlgo_t(algo), space_ptr, bytes,
                                                                &beta, d.weight.get(), dw_out.raw_data());
                        },
                        dw_out, w.grad().to(dtype)});

  std::printf("%s: input [%lld, %lld, %lld, %lld], weight [%lld, %lld, %lld, %lld], padding %lld\n",
              sg::dtype_name(dtype), (long long)s.N, (long long)s.C, (long long)s.H, (long long)s.W, (long long)s.K,
              (long long)s.C, (long long)s.R, (long long)s.S, (long long)s.pad);
  for (Direction& direction : directions) measure(direction, d.conv, space);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> shape = {6, 32, 14, 14, 64, 5, 5, 2};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--shape") == 0) shape = parse_list(argv[++i]);
  }
  if (!sg::cuda::is_available()) {
    std::printf("bench_cudnn_algorithms: nothing to measure, no GPU: %s\n", sg::cuda::unavailable_reason().c_str());
    return 0;
  }
  try {
    SG_CHECK(shape.size() == 8, "bench_cudnn_algorithms: --shape takes N,C,H,W,K,R,S,PAD, got ", shape.size(),
             " numbers");
    const Shape s{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6], shape[7]};
    std::printf("cuDNN %zu\n", cudnnGetVersion());
    for (sg::DType dtype : {sg::DType::f16, sg::DType::bf16, sg::DType::f32}) run(s, dtype);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_cudnn_algorithms: %s\n", error.what());
    return 1;
  }
  return 0;
}
