// Causal self-attention, forward + backward, f32: the fused scaled_dot_product_attention against the
// same attention composed of ops (matmul, masked_fill, softmax, matmul), on GPT-like (B, H, T, D)
// shapes and 1 and 2 threads. One JSON line per measurement; ms is the median of --repeats timed
// forward + backward passes after one warm-up, min_ms the fastest (on a shared machine, the one least
// disturbed). bench/attention_torch.py measures PyTorch the same
// way; docs/performance.md ("Attention") has the figures and how they were taken.
//
//   ./build/bench/bench_attention [--threads 1,2] [--repeats 5] [--impl fused,composed] [--dropout 0.1]
//                                 [--shape 32,6,128,32] [--layout heads]
//   ./build/bench/bench_attention --rss fused --T 4096   # one pass, then the process's peak RSS
//
// --shape B,H,T,D runs that shape alone. --layout heads makes q, k, v and grad_out the heads' views
// of [B, T, H * D] tensors, as a GPT's attention layer hands them over (rows H * D apart, the
// gradients back in that layout), instead of contiguous [B, H, T, D] tensors.
//
// The --rss mode runs a single configuration in a fresh process, because getrusage's peak covers
// the whole life of the process: (B, H, D) = (1, 8, 64) at the given T; it prints the peak before
// the pass (inputs made) and after it, whose difference is what the pass itself took.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "parse_list.h"
#include "syncgrad.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape4 {
  int64_t B, H, T, D;
};

struct Inputs {
  sg::Tensor q, k, v, grad_out, future;  // future: bool [T, T], true above the diagonal
  double dropout_p = 0;                  // on the attention probabilities, as GPT's attn_pdrop
  int64_t heads = 0;                     // > 0: q, k, v are [B, T, heads * D] leaves, split per pass
};

// x itself, or with heads > 0 its [B, heads, T, D] view, as a GPT's attention layer splits its
// projections (rows heads * D apart).
sg::Tensor split_heads(const sg::Tensor& x, int64_t heads) {
  if (heads == 0) return x;
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// The causal mask only when the composed version runs: at T = 4096 building it takes 200 MB,
// which would hide the fused op's own footprint in the --rss figures.
Inputs make_inputs(const Shape4& s, bool with_mask, bool heads_view = false) {
  sg::Generator generator(0);
  const sg::Shape shape = heads_view ? sg::Shape{s.B, s.T, s.H * s.D} : sg::Shape{s.B, s.H, s.T, s.D};
  Inputs in{sg::randn(shape, {}, &generator).requires_grad_(), sg::randn(shape, {}, &generator).requires_grad_(),
            sg::randn(shape, {}, &generator).requires_grad_(), sg::randn(shape, {}, &generator), sg::Tensor()};
  if (heads_view) in.heads = s.H;
  in.grad_out = split_heads(in.grad_out, in.heads);
  if (with_mask) in.future = sg::ones({s.T, s.T}).triu(1).ne(sg::zeros({s.T, s.T}));
  return in;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // Linux reports KiB
}

// softmax(q k^T / sqrt(D), causal) v as separate ops: what a model without the fused op runs.
sg::Tensor composed(const Inputs& in) {
  const sg::Tensor q = split_heads(in.q, in.heads), k = split_heads(in.k, in.heads);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const sg::Tensor scores = sg::matmul(q, k.transpose(-2, -1)) * scale;
  const sg::Tensor probs = sg::softmax(scores.masked_fill(in.future, -std::numeric_limits<double>::infinity()), -1);
  return sg::matmul(sg::nn::functional::dropout(probs, in.dropout_p), split_heads(in.v, in.heads));
}

sg::Tensor fused(const Inputs& in) {
  return sg::scaled_dot_product_attention(split_heads(in.q, in.heads), split_heads(in.k, in.heads),
                                          split_heads(in.v, in.heads), {.dropout_p = in.dropout_p, .is_causal = true});
}

// One forward + backward, in ms; gradients are dropped afterwards so that none accumulate.
double forward_backward_ms(const Inputs& in, bool use_fused) {
  const auto start = Clock::now();
  const sg::Tensor out = use_fused ? fused(in) : composed(in);
  out.backward(in.grad_out);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (sg::Tensor leaf : {in.q, in.k, in.v}) leaf.set_grad(sg::Tensor());  // a handle: the same leaf
  return ms;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

const char* flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string rss_impl = flag(argc, argv, "--rss", "");
  if (!rss_impl.empty()) {
    const int64_t T = std::stoll(flag(argc, argv, "--T", "1024"));
    sg::set_num_threads(parse_list(flag(argc, argv, "--threads", "1")).front());
    const Inputs in = make_inputs({1, 8, T, 64}, rss_impl == "composed");
    const double before = peak_rss_mb();  // the inputs (and the mask) are already there
    const double ms = forward_backward_ms(in, rss_impl == "fused");
    std::printf(
        "{\"bench\":\"attention_rss\",\"impl\":\"%s\",\"B\":1,\"H\":8,\"T\":%lld,\"D\":64,\"causal\":true,"
        "\"ms\":%.1f,\"rss_before_mb\":%.1f,\"peak_rss_mb\":%.1f}\n",
        rss_impl.c_str(), static_cast<long long>(T), ms, before, peak_rss_mb());
    return 0;
  }
  const std::vector<int> threads = parse_list(flag(argc, argv, "--threads", "1,2"));
  const int repeats = std::stoi(flag(argc, argv, "--repeats", "5"));
  const std::string impls = flag(argc, argv, "--impl", "fused,composed");
  const double dropout_p = std::stod(flag(argc, argv, "--dropout", "0"));
  const std::string layout = flag(argc, argv, "--layout", "contiguous");
  if (layout != "contiguous" && layout != "heads") {
    std::fprintf(stderr, "bench_attention: --layout takes contiguous or heads, not '%s'\n", layout.c_str());
    return 1;
  }
  const bool heads_view = layout == "heads";
  std::vector<Shape4> shapes{{32, 6, 128, 32}, {8, 6, 256, 64}, {4, 12, 1024, 64}};
  if (const std::vector<int> only = parse_list(flag(argc, argv, "--shape", "")); !only.empty()) {
    if (only.size() != 4) {
      std::fprintf(stderr, "bench_attention: --shape takes B,H,T,D\n");
      return 1;
    }
    shapes = {{only[0], only[1], only[2], only[3]}};
  }
  for (const Shape4& s : shapes) {
    Inputs in = make_inputs(s, /*with_mask=*/true, heads_view);
    in.dropout_p = dropout_p;
    for (const int n : threads) {
      sg::set_num_threads(n);
      for (const bool use_fused : {true, false}) {
        const char* impl = use_fused ? "fused" : "composed";
        if (impls.find(impl) == std::string::npos) continue;
        forward_backward_ms(in, use_fused);  // warm-up: allocator, OpenBLAS's buffers
        std::vector<double> times;
        for (int r = 0; r < repeats; ++r) times.push_back(forward_backward_ms(in, use_fused));
        std::printf(
            "{\"bench\":\"attention\",\"impl\":\"%s\",\"B\":%lld,\"H\":%lld,\"T\":%lld,\"D\":%lld,"
            "\"causal\":true,\"dropout_p\":%g,\"layout\":\"%s\",\"threads\":%d,\"ms\":%.2f,\"min_ms\":%.2f}\n",
            impl, static_cast<long long>(s.B), static_cast<long long>(s.H), static_cast<long long>(s.T),
            static_cast<long long>(s.D), dropout_p, heads_view ? "heads" : "contiguous", n, median(times),
            *std::min_element(times.begin(), times.end()));
        std::fflush(stdout);
      }
    }
  }
}
