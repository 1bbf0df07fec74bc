// bench_gpt_kernels: the element-wise kernels of a minGPT training step that are not GEMMs, on
// gpt-mini's shapes (batch 32 x block 128 = 4096 tokens, n_embd 192, MLP width 768), f32:
//   - the random fills: bernoulli_ (what dropout draws), uniform_ and normal_ (model construction);
//   - dropout as a whole (draw, scale and multiply: one pass, core/cpu/dropout.cpp);
//   - GELU (erf form), forward and backward;
//   - sum over the leading dim: the bias gradients, [4096, C] -> [C], plus a strided view and a
//     broadcast (expanded) input;
//   - layer norm over n_embd, forward and backward (all three gradients), [4096, 192].
// Each line prints the median wall time of --repeats runs after one warm-up, in ms and ns per
// element; one JSON line per measurement follows. docs/performance.md ("minGPT's element-wise
// kernels") has the figures.
//
//   ./build/bench/bench_gpt_kernels [--threads 1,2] [--repeats 15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/norm.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"
#include "nn/functional.h"
#include "parse_list.h"
#include "syncgrad.h"

namespace {

double median_ms(int repeats, const std::function<void()>& run) {
  run();  // warm-up: first-touch page faults, the thread pool
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct Measurement {
  std::string kernel;
  int64_t elements = 0;
  double ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2};
  int repeats = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = parse_list(argv[i + 1]);
    else if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--repeats 15]\n", argv[0]);
      return 2;
    }
  }
  constexpr int64_t kTokens = 32 * 128, kEmbd = 192, kHidden = 4 * kEmbd;
  sg::Generator generator(0);
  const sg::Tensor hidden = sg::randn({kTokens, kHidden}, {}, &generator);  // the MLP's pre-GELU activations
  const sg::Tensor grad_hidden = sg::randn({kTokens, kHidden}, {}, &generator);
  const sg::Tensor residual = sg::randn({kTokens, kEmbd}, {}, &generator);
  const sg::Tensor wide = sg::randn({kTokens, 2 * kHidden}, {}, &generator);
  const sg::Tensor row = sg::randn({1, kHidden}, {}, &generator);
  sg::Tensor fill_target = sg::empty({kTokens, kHidden});
  sg::Tensor gelu_grad = sg::empty({kTokens, kHidden});
  const sg::Tensor norm_weight = sg::randn({kEmbd}, {}, &generator), norm_bias = sg::randn({kEmbd}, {}, &generator);
  const sg::Tensor normed = sg::empty({kTokens, kEmbd}), norm_grad_input = sg::empty({kTokens, kEmbd});
  const sg::Tensor norm_grad_weight = sg::empty({kEmbd}), norm_grad_bias = sg::empty({kEmbd});
  const sg::Tensor row_mean = sg::empty({kTokens}), row_rstd = sg::empty({kTokens});
  sg::kernels::layer_norm(normed, row_mean, row_rstd, residual, norm_weight, norm_bias, kEmbd, 1e-5);

  sg::NoGradGuard no_grad;
  const std::vector<std::pair<std::string, std::function<void()>>> kernels{
      {"bernoulli_", [&] { sg::kernels::bernoulli_(fill_target, 0.9, generator); }},
      {"uniform_", [&] { sg::kernels::uniform_(fill_target, -1.0, 1.0, generator); }},
      {"normal_", [&] { sg::kernels::normal_(fill_target, 0.0, 0.02, generator); }},
      {"dropout", [&] { sg::nn::functional::dropout(hidden, 0.1, true, &generator); }},
      {"gelu", [&] { hidden.gelu(); }},
      {"gelu_backward", [&] { sg::kernels::binary(sg::BinaryOp::gelu_erf_backward, gelu_grad, grad_hidden, hidden); }},
      {"sum_dim0 [4096,768]", [&] { grad_hidden.sum({0}); }},
      {"sum_dim0 [4096,192]", [&] { residual.sum({0}); }},
      {"sum_dim0 strided [4096,768 of 1536]", [&] { wide.slice(1, 0, 2 * kHidden, 2).sum({0}); }},
      {"sum_dim0 expanded [4096,768]",
       [&] {
         row.expand({kTokens, kHidden}).sum({0});
       }},
      {"layer_norm [4096,192]",
       [&] { sg::kernels::layer_norm(normed, row_mean, row_rstd, residual, norm_weight, norm_bias, kEmbd, 1e-5); }},
      {"layer_norm_backward [4096,192]",
       [&] {
         sg::kernels::layer_norm_backward(norm_grad_input, norm_grad_weight, norm_grad_bias, normed, residual,
                                          norm_weight, row_mean, row_rstd, kEmbd);
       }},
  };
  auto elements_of = [&](const std::string& name) {
    return name.find("192") != std::string::npos ? kTokens * kEmbd : kTokens * kHidden;
  };

  std::vector<std::pair<int, Measurement>> results;
  for (int t : threads) {
    sg::set_num_threads(t);
    std::printf("threads %d\n%-38s %10s %12s\n", t, "kernel", "ms", "ns/element");
    for (const auto& [name, run] : kernels) {
      const Measurement m{name, elements_of(name), median_ms(repeats, run)};
      std::printf("%-38s %10.3f %12.3f\n", name.c_str(), m.ms, m.ms * 1e6 / static_cast<double>(m.elements));
      results.emplace_back(t, m);
    }
  }
  for (const auto& [t, m] : results)
    std::printf(
        "{\"bench\":\"gpt_kernels\",\"kernel\":\"%s\",\"threads\":%d,\"elements\":%lld,\"ms\":%.4f,"
        "\"ns_per_element\":%.4f}\n",
        m.kernel.c_str(), t, static_cast<long long>(m.elements), m.ms, m.ms * 1e6 / static_cast<double>(m.elements));
}
