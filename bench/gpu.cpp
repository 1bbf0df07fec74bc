// GPU throughput: matmul (f32, f32 with TF32, f16, bf16; square n x n), the CNN's and a ResNet
// layer's conv2d forward, and the fused causal attention's forward + backward in bf16, in GFLOP/s
// (TFLOP/s on a large GPU), timed with CUDA events so the number is the GPU's time, not the time to
// queue the kernels. Without a usable GPU it says why and exits 0: there is nothing to measure.
//
//   ./build/bench/bench_gpu [--sizes 1024,4096,8192] [--attention 8,12,1024,64]
// Prints one line and one JSON object per measurement; bench/gpu_torch.py measures PyTorch's
// torch.mm, conv2d and scaled_dot_product_attention the same way under the same names.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "parse_list.h"
#include "syncgrad.h"

namespace {

// GPU milliseconds per call of `fn`: 3 warm-up calls (cuBLAS/cuDNN pick algorithms and fill the
// caching allocator), then the best of 5 samples of 20 calls.
double milliseconds_per_call(const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  sg::cuda::synchronize();
  double best = 1e30;
  for (int sample = 0; sample < 5; ++sample) {
    sg::cuda::Event start(true), stop(true);
    start.record();
    for (int i = 0; i < 20; ++i) fn();
    stop.record();
    stop.synchronize();
    best = std::min(best, start.elapsed_ms(stop) / 20);
  }
  return best;
}

void report(const std::string& what, const std::string& dtype, double flops, double ms) {
  const double gflops = flops / (ms * 1e6);
  std::printf("%-34s %-9s %9.3f ms %10.1f GFLOP/s\n", what.c_str(), dtype.c_str(), ms, gflops);
  std::printf("{\"bench\":\"gpu\",\"op\":\"%s\",\"dtype\":\"%s\",\"ms\":%.4f,\"gflops\":%.1f}\n", what.c_str(),
              dtype.c_str(), ms, gflops);
}

void bench_matmul(int64_t n) {
  const sg::Device gpu = sg::Device::cuda(0);
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  struct Variant {
    const char* name;
    sg::DType dtype;
    bool tf32;
  };
  for (const Variant& v : {Variant{"f32", sg::DType::f32, false}, Variant{"tf32", sg::DType::f32, true},
                           Variant{"f16", sg::DType::f16, false}, Variant{"bf16", sg::DType::bf16, false}}) {
    sg::cuda::set_allow_tf32(v.tf32);
    const sg::Tensor a = sg::randn({n, n}, {v.dtype, gpu}), b = sg::randn({n, n}, {v.dtype, gpu});
    sg::NoGradGuard no_grad;
    report("matmul " + std::to_string(n) + "^3", v.name, flops, milliseconds_per_call([&] { a.matmul(b); }));
  }
  sg::cuda::set_allow_tf32(false);
}

void bench_conv(const char* name, int64_t batch, int64_t in_channels, int64_t out_channels, int64_t size,
                int64_t kernel, int64_t padding) {
  const sg::Device gpu = sg::Device::cuda(0);
  const sg::Tensor x = sg::randn({batch, in_channels, size, size}, {sg::DType::f32, gpu});
  const sg::Tensor w = sg::randn({out_channels, in_channels, kernel, kernel}, {sg::DType::f32, gpu});
  const int64_t out_size = size + 2 * padding - kernel + 1;
  const double flops = 2.0 * batch * out_channels * out_size * out_size * in_channels * kernel * kernel;
  sg::NoGradGuard no_grad;
  report(name, "f32", flops, milliseconds_per_call([&] { sg::conv2d(x, w, sg::Tensor(), 1, padding); }));
}

// Causal attention over q, k, v [B, H, T, E] in bf16: the forward and the backward of one call. The
// FLOPs are FlashAttention's count: forward 4 B H T^2 E (q k^T and p v), halved by the causal mask,
// backward 2.5 times the forward.
void bench_attention(const std::vector<int>& shape) {
  SG_CHECK(shape.size() == 4, "bench_gpu: --attention takes B,H,T,E, got ", shape.size(), " numbers");
  const sg::Device gpu = sg::Device::cuda(0);
  const int64_t B = shape[0], H = shape[1], T = shape[2], E = shape[3];
  const sg::TensorOptions bf16{sg::DType::bf16, gpu};
  sg::Tensor q = sg::randn({B, H, T, E}, bf16), k = sg::randn({B, H, T, E}, bf16), v = sg::randn({B, H, T, E}, bf16);
  q.requires_grad_();
  k.requires_grad_();
  v.requires_grad_();
  const sg::Tensor grad_out = sg::randn({B, H, T, E}, bf16);
  const double flops = 3.5 * 4.0 * B * H * T * T * E / 2;
  const std::string name = "attention causal fwd+bwd " + std::to_string(B) + "x" + std::to_string(H) + "x" +
                           std::to_string(T) + "x" + std::to_string(E);
  report(name, "bf16", flops, milliseconds_per_call([&] {
           sg::scaled_dot_product_attention(q, k, v, {.is_causal = true}).backward(grad_out);
         }));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1024, 4096, 8192};
  std::vector<int> attention = {8, 12, 1024, 64};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--sizes") == 0) sizes = parse_list(argv[++i]);
    if (std::strcmp(argv[i], "--attention") == 0) attention = parse_list(argv[++i]);
  }
  if (!sg::cuda::is_available()) {
    std::printf("bench_gpu: nothing to measure, no GPU: %s\n", sg::cuda::unavailable_reason().c_str());
    return 0;
  }
  try {
    for (int n : sizes) bench_matmul(n);
    bench_conv("conv2d CNN 1->32 k5 28x28 b64", 64, 1, 32, 28, 5, 2);
    bench_conv("conv2d CNN 32->64 k5 14x14 b64", 64, 32, 64, 14, 5, 2);
    bench_conv("conv2d ResNet 64->64 k3 56x56 b8", 8, 64, 64, 56, 3, 1);
    bench_attention(attention);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_gpu: %s\n", error.what());
    return 1;
  }
  return 0;
}
