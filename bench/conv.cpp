// Convolution and pooling speed on the shapes that matter here: the Fashion-MNIST CNN's two
// convolutions and two 2x2 max pools (batch 64, f32) and a ResNet 3x3 convolution (64 channels,
// 56 x 56, batch 8), forward and backward, on 1 and 2 threads, through the public API as a
// training step runs them (backward = forward + backward minus forward, the gradients of every
// input that needs one; the CNN's first layer does not need its input's gradient).
// Prints a table, then one JSON object per measurement. bench/conv_torch.py measures PyTorch on
// the same shapes the same way.
//
//   ./build/bench/bench_conv [--threads 1,2]
#include <algorithm>

#include "parse_list.h"
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "syncgrad.h"

namespace {

using Clock = std::chrono::steady_clock;

// The best seconds per call of `fn` over 7 samples, each of enough calls to last >= 50 ms. The best,
// not the median: other processes on a shared machine only ever add time.
double seconds_per_call(const std::function<void()>& fn) {
  fn();  // warm-up: first touch of buffers, thread start-up
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
  return *std::min_element(samples.begin(), samples.end());
}

struct ConvShape {
  const char* name;
  int64_t N, C, K, H, W, kernel, padding;
  bool input_needs_grad;
};

void clear_grads(const sg::TensorList& tensors) {
  for (const sg::Tensor& t : tensors) {
    sg::Tensor handle = t;
    handle.mutable_grad() = sg::Tensor();
  }
}

// One table row now, one JSON line (kept in `json`) for the end.
void report(std::vector<std::string>& json, const char* bench, const char* shape, const char* direction, int threads,
            double seconds, double flops) {
  char line[256];
  std::snprintf(line, sizeof line, "{\"bench\":\"%s\",\"shape\":\"%s\",\"direction\":\"%s\",\"threads\":%d,\"ms\":%.3f",
                bench, shape, direction, threads, seconds * 1e3);
  std::string entry = line;
  std::printf("%-11s %-9s %7d %9.3f", shape, direction, threads, seconds * 1e3);
  if (flops > 0) {
    std::printf(" %9.1f", flops / seconds / 1e9);
    std::snprintf(line, sizeof line, ",\"gflops\":%.1f", flops / seconds / 1e9);
    entry += line;
  }
  std::printf("\n");
  json.push_back(entry + "}");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts{1, 2};
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--threads") == 0) thread_counts = parse_list(argv[i + 1]);

  const std::vector<ConvShape> convs{
      {"cnn_conv1", 64, 1, 32, 28, 28, 5, 2, false},
      {"cnn_conv2", 64, 32, 64, 14, 14, 5, 2, true},
      {"resnet_3x3", 8, 64, 64, 56, 56, 3, 1, true},
  };
  struct PoolShape {
    const char* name;
    int64_t N, C, H, W;
  };
  const std::vector<PoolShape> pools{{"cnn_pool1", 64, 32, 28, 28}, {"cnn_pool2", 64, 64, 14, 14}};

  std::printf("f32, best of 7 samples; conv GFLOP/s counts 2 N K P Q C R S per product (forward one, backward\n"
              "two: grad_input and grad_weight, or one where the input needs no gradient)\n\n");
  std::printf("%-11s %-9s %7s %9s %9s\n", "shape", "direction", "threads", "ms", "GFLOP/s");
  std::vector<std::string> json;
  for (int threads : thread_counts) {
    sg::set_num_threads(threads);
    sg::Generator generator(42);
    for (const ConvShape& s : convs) {
      sg::Tensor x = sg::randn({s.N, s.C, s.H, s.W}, {}, &generator).requires_grad_(s.input_needs_grad);
      sg::Tensor w = sg::randn({s.K, s.C, s.kernel, s.kernel}, {}, &generator).requires_grad_();
      sg::Tensor b = sg::randn({s.K}, {}, &generator).requires_grad_();
      const sg::Tensor g = sg::randn({s.N, s.K, s.H, s.W}, {}, &generator);  // stride 1, "same" padding
      const double flops = 2.0 * s.N * s.K * s.H * s.W * s.C * s.kernel * s.kernel;
      const double forward = seconds_per_call([&] { sg::conv2d(x, w, b, 1, s.padding); });
      const double both = seconds_per_call([&] {
        clear_grads({x, w, b});
        sg::conv2d(x, w, b, 1, s.padding).backward(g);
      });
      report(json, "conv", s.name, "forward", threads, forward, flops);
      report(json, "conv", s.name, "backward", threads, both - forward, flops * (s.input_needs_grad ? 2 : 1));
    }
    for (const PoolShape& s : pools) {
      sg::Tensor x = sg::randn({s.N, s.C, s.H, s.W}, {}, &generator).requires_grad_();
      const sg::Tensor g = sg::randn({s.N, s.C, s.H / 2, s.W / 2}, {}, &generator);
      const double forward = seconds_per_call([&] { sg::max_pool2d(x, 2); });
      const double both = seconds_per_call([&] {
        clear_grads({x});
        sg::max_pool2d(x, 2).backward(g);
      });
      report(json, "max_pool", s.name, "forward", threads, forward, 0);
      report(json, "max_pool", s.name, "backward", threads, both - forward, 0);
    }
  }
  std::printf("\n");
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  return 0;
}
