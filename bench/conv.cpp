// Convolution and pooling speed on the shapes the models use, f32, on 1 and 2 threads:
//   - the Fashion-MNIST CNN's two convolutions (batch 64: 1->32 and 32->64, 5x5, padding 2) and
//     its two 2x2 max pools;
//   - ResNet34's convolutions at batch 4 and 16: the 7x7/2 stem (3->64, 224x224), the 3x3 convs
//     of its four stages (64, 128, 256, 512 channels at 56, 28, 14, 7) and the 1x1/2 downsamples
//     between stages;
//   - the same network on 64x64 images at batch 16 (`resnet64_`): the stem on 64x64, then the stages
//     at 16, 8, 4 and 2 (after the stem's stride and the max pool), where one image's GEMM has as
//     few as 4 columns.
// Each convolution kernel is timed on its own (forward, backward data = grad_input, backward
// weights = grad_weight), through sg::kernels as autograd calls it, output allocation included;
// the line before a shape's timings names the implementation each pass runs (oneDNN's kernel and
// the operands reordered, or im2col + GEMM). --reference also times the im2col + GEMM reference
// (sg::cpu::conv2d_reference, ...). A time is the median of 7 samples after a warm-up, each sample
// enough calls to last >= 50 ms. Prints a table, then one JSON object per measurement;
// bench/conv_torch.py measures PyTorch on the same shapes the same way.
//
//   ./build/bench/bench_conv [--threads 1,2] [--only resnet] [--reference]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/cpu/conv_kernels.h"  // defines: the oneDNN path, the reference and ConvPass, timed here
#include "core/kernels/conv.h"
#include "parse_list.h"
#include "syncgrad.h"

namespace {

using Clock = std::chrono::steady_clock;

// The median seconds per call of `fn` over 7 samples, each of enough calls to last >= 50 ms.
double seconds_per_call(const std::function<void()>& fn) {
  fn();  // warm-up: the oneDNN plan, first touch of buffers, thread start-up
  auto start = Clock::now();
  fn();
  const double once = std::chrono::duration<double>(Clock::now() - start).count();
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(once, 1e-9)));
  std::vector<double> samples;
  for (int s = 0; s < 7; ++s) {
    start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct ConvShape {
  std::string name;
  int64_t N, C, K, H, W, kernel, stride, padding;
};

std::vector<ConvShape> conv_shapes() {
  std::vector<ConvShape> shapes{{"cnn_conv1", 64, 1, 32, 28, 28, 5, 1, 2}, {"cnn_conv2", 64, 32, 64, 14, 14, 5, 1, 2}};
  // ResNet34 on image x image inputs: stem, then each stage's 3x3 conv and the downsample into it.
  const auto add_resnet = [&](const std::string& prefix, int64_t image, int64_t N) {
    const std::string batch = "_b" + std::to_string(N);
    shapes.push_back({prefix + "stem" + batch, N, 3, 64, image, image, 7, 2, 3});
    for (int64_t stage = 0; stage < 4; ++stage) {
      const int64_t channels = 64 << stage, size = (image / 4) >> stage;
      shapes.push_back({prefix + "3x3_" + std::to_string(size) + batch, N, channels, channels, size, size, 3, 1, 1});
      if (stage > 0)  // the downsample into this stage: 1x1, stride 2, from the previous stage
        shapes.push_back(
            {prefix + "down_" + std::to_string(size) + batch, N, channels / 2, channels, 2 * size, 2 * size, 1, 2, 0});
    }
  };
  for (int64_t N : {4, 16}) add_resnet("resnet_", 224, N);
  add_resnet("resnet64_", 64, 16);
  return shapes;
}

// One table row now, one JSON line (kept in `json`) for the end.
void report(std::vector<std::string>& json, const char* bench, const std::string& shape, const char* impl,
            const char* direction, int threads, double seconds, double flops) {
  char line[320];
  std::snprintf(line, sizeof line,
                "{\"bench\":\"%s\",\"impl\":\"%s\",\"shape\":\"%s\",\"direction\":\"%s\",\"threads\":%d,\"ms\":%.3f",
                bench, impl, shape.c_str(), direction, threads, seconds * 1e3);
  std::string entry = line;
  std::printf("%-20s %-9s %-12s %7d %9.3f", shape.c_str(), impl, direction, threads, seconds * 1e3);
  if (flops > 0) {
    std::printf(" %9.1f", flops / seconds / 1e9);
    std::snprintf(line, sizeof line, ",\"gflops\":%.1f", flops / seconds / 1e9);
    entry += line;
  }
  std::printf("\n");
  json.push_back(entry + "}");
}

// The three kernels of one implementation, with the signatures of sg::kernels.
struct ConvKernels {
  const char* name;
  void (*forward)(const sg::Tensor&, const sg::Tensor&, const sg::Tensor&, const sg::Tensor&, const sg::Conv2dParams&);
  void (*grad_input)(const sg::Tensor&, const sg::Tensor&, const sg::Tensor&, const sg::Conv2dParams&);
  void (*grad_weight)(const sg::Tensor&, const sg::Tensor&, const sg::Tensor&, const sg::Conv2dParams&);
};

void time_conv(std::vector<std::string>& json, const ConvShape& s, const ConvKernels& kernels, int threads,
               sg::Generator& generator) {
  const sg::Tensor x = sg::randn({s.N, s.C, s.H, s.W}, {}, &generator);
  const sg::Tensor w = sg::randn({s.K, s.C, s.kernel, s.kernel}, {}, &generator);
  const sg::Tensor b = sg::randn({s.K}, {}, &generator);
  const sg::Conv2dParams params{s.stride, s.padding, 1, 1};
  const int64_t P = sg::window_output_size(s.H, s.kernel, s.stride, s.padding, 1);
  const int64_t Q = sg::window_output_size(s.W, s.kernel, s.stride, s.padding, 1);
  const sg::Tensor g = sg::randn({s.N, s.K, P, Q}, {}, &generator);
  const double flops = 2.0 * s.N * s.K * P * Q * s.C * s.kernel * s.kernel;  // one pass
  // Each call allocates its output, as a training step does.
  const double forward = seconds_per_call([&] { kernels.forward(sg::empty(g.sizes()), x, w, b, params); });
  const double grad_input = seconds_per_call([&] { kernels.grad_input(sg::empty(x.sizes()), g, w, params); });
  const double grad_weight = seconds_per_call([&] { kernels.grad_weight(sg::empty(w.sizes()), g, x, params); });
  report(json, "conv", s.name, kernels.name, "forward", threads, forward, flops);
  report(json, "conv", s.name, kernels.name, "grad_input", threads, grad_input, flops);
  report(json, "conv", s.name, kernels.name, "grad_weight", threads, grad_weight, flops);
}

void print_implementations(const ConvShape& s) {
  const sg::Conv2dParams params{s.stride, s.padding, 1, 1};
  const sg::Shape input{s.N, s.C, s.H, s.W}, weight{s.K, s.C, s.kernel, s.kernel};
  const auto name = [&](sg::cpu::ConvPass pass) {
    return sg::cpu::conv2d_implementation(pass, input, weight, sg::DType::f32, params);
  };
  std::printf("# %s: forward %s | grad_input %s | grad_weight %s\n", s.name.c_str(),
              name(sg::cpu::ConvPass::forward).c_str(), name(sg::cpu::ConvPass::grad_input).c_str(),
              name(sg::cpu::ConvPass::grad_weight).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts{1, 2};
  std::string only;  // run the shapes whose name contains this
  bool reference = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) thread_counts = parse_list(argv[++i]);
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--reference") == 0) reference = true;
  }
  std::vector<ConvKernels> implementations{
      {"syncgrad", sg::kernels::conv2d, sg::kernels::conv2d_grad_input, sg::kernels::conv2d_grad_weight}};
  if (reference)
    implementations.push_back({"im2col", sg::cpu::conv2d_reference, sg::cpu::conv2d_grad_input_reference,
                               sg::cpu::conv2d_grad_weight_reference});
  struct PoolShape {
    const char* name;
    int64_t N, C, H, W;
  };
  const std::vector<PoolShape> pools{{"cnn_pool1", 64, 32, 28, 28}, {"cnn_pool2", 64, 64, 14, 14}};

  std::printf("f32, median of 7 samples; conv GFLOP/s counts 2 N K P Q C R S per pass\n\n");
  std::printf("%-20s %-9s %-12s %7s %9s %9s\n", "shape", "impl", "direction", "threads", "ms", "GFLOP/s");
  std::vector<std::string> json;
  for (int threads : thread_counts) {
    sg::set_num_threads(threads);
    sg::Generator generator(42);
    for (const ConvShape& s : conv_shapes()) {
      if (s.name.find(only) == std::string::npos) continue;
      print_implementations(s);
      for (const ConvKernels& kernels : implementations) time_conv(json, s, kernels, threads, generator);
    }
    for (const PoolShape& s : pools) {
      if (std::string(s.name).find(only) == std::string::npos) continue;
      sg::Tensor x = sg::randn({s.N, s.C, s.H, s.W}, {}, &generator).requires_grad_();
      const sg::Tensor g = sg::randn({s.N, s.C, s.H / 2, s.W / 2}, {}, &generator);
      const double forward = seconds_per_call([&] { sg::max_pool2d(x, 2); });
      const double both = seconds_per_call([&] {
        x.mutable_grad() = sg::Tensor();
        sg::max_pool2d(x, 2).backward(g);
      });
      report(json, "max_pool", s.name, "syncgrad", "forward", threads, forward, 0);
      report(json, "max_pool", s.name, "syncgrad", "backward", threads, both - forward, 0);
    }
  }
  std::printf("\n");
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  return 0;
}
