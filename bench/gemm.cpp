// GEMM throughput: syncgrad's matmul (public API) against the libraries it chooses from called
// directly — OpenBLAS with the kernel chosen for this CPU and oneDNN's sgemm (core/cpu/blas.h,
// Note [The f32 GEMM library]) — against Eigen's own product and, when Debian's BLIS is
// installed (libblis4-openmp), against BLIS's — f32 C = A B on square sizes and on the shapes of
// gpt-mini's linear layers, on 1 and 2 threads, all measured in one run and interleaved so that
// load from other processes hits every implementation alike. Prints a table, then one JSON object
// per measurement. docs/performance.md explains the numbers.
//
//   ./build/bench/bench_gemm [--sizes 256,512,1024,2048] [--shapes 4096x576x192,...] [--threads 1,2]
//
// A shape is M x N x K: A is M x K, B is K x N. --sizes and --shapes each replace their half of
// the default list.
#include <dlfcn.h>

#include <Eigen/Core>  // defines: Eigen::MatrixXf

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cblas.h>               // declares: cblas_sgemm (BLIS's is looked up with dlsym)
#include <oneapi/dnnl/dnnl.h>    // declares: dnnl_sgemm
#include <oneapi/dnnl/dnnl.hpp>  // defines: dnnl::matmul (the bias fused into the product)

#include "core/cpu/blas.h"  // defines: blas_sgemm, blas_description
#include "parse_list.h"
#include "syncgrad.h"

namespace {

using Clock = std::chrono::steady_clock;

// The machine's f32 peak from /proc/cpuinfo: cores x GHz x FLOPs per cycle per core, where a
// core with AVX-512 retires 2 FMA x 16 lanes x 2 FLOPs = 64 per cycle and one with AVX2 + FMA
// 2 x 8 x 2 = 32. Both assume two FMA units per core (true of recent server cores, not of all
// AVX-512 parts) and the "cpu MHz" the kernel reports (a VM shows the nominal clock; turbo can
// exceed it, so a measurement above "peak" means the clock is higher than reported).
struct Peak {
  std::string model = "unknown";
  double ghz = 0;
  int flops_per_cycle = 0;
  std::string isa = "unknown";
  double gflops(int threads) const { return threads * ghz * flops_per_cycle; }
};

Peak read_peak() {
  Peak peak;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (key == "model name" && peak.model == "unknown") peak.model = value;
    if (key == "cpu MHz" && peak.ghz == 0) peak.ghz = std::stod(value) / 1000.0;
    if (key == "flags" && peak.flops_per_cycle == 0) {
      const std::string flags = " " + value + " ";
      if (flags.find(" avx512f ") != std::string::npos) {
        peak.flops_per_cycle = 64;
        peak.isa = "AVX-512 (2 FMA x 16 f32 x 2)";
      } else if (flags.find(" avx2 ") != std::string::npos && flags.find(" fma ") != std::string::npos) {
        peak.flops_per_cycle = 32;
        peak.isa = "AVX2 FMA (2 FMA x 8 f32 x 2)";
      }
    }
  }
  return peak;
}

// Seconds per call: `fn` is run in samples of `calls` calls (chosen so a sample lasts >= 50 ms).
struct Timer {
  std::function<void()> fn;
  int calls = 1;
  std::vector<double> samples;

  void calibrate() {
    fn();  // warm-up: first-touch of the output, thread start-up, BLAS buffers
    const auto start = Clock::now();
    fn();
    const double once = std::chrono::duration<double>(Clock::now() - start).count();
    calls = std::max(1, static_cast<int>(0.05 / std::max(once, 1e-9)));
  }
  void sample() {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  double median() {
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  }
};

// The 1-minute load average: other processes on the machine make the numbers noisy.
std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one_minute;
  file >> one_minute;
  return one_minute.empty() ? "unknown" : one_minute;
}

struct GemmShape {
  int m, n, k;
  std::string str() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
};

// "4096x576x192,192x768x4096" -> shapes (M x N x K).
std::vector<GemmShape> parse_shapes(const char* text) {
  std::vector<GemmShape> shapes;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    GemmShape shape{};
    char x1 = 0, x2 = 0;
    std::stringstream fields(item);
    if (!(fields >> shape.m >> x1 >> shape.n >> x2 >> shape.k) || x1 != 'x' || x2 != 'x') {
      std::fprintf(stderr, "--shapes: '%s' is not MxNxK\n", item.c_str());
      std::exit(2);
    }
    shapes.push_back(shape);
  }
  return shapes;
}

// gpt-mini (6 layers, 6 heads, 192 wide) at batch 32, block 128: 4096 tokens through the
// attention's QKV and output projections and the MLP's two layers (forward and input gradient).
// Its weight gradients (M x N x 4096) read A transposed, a layout this bench does not time.
const std::vector<GemmShape> kGptMiniShapes{{4096, 576, 192}, {4096, 192, 192}, {4096, 768, 192}, {4096, 192, 768}};

// Debian's BLIS, loaded beside OpenBLAS when it is installed: its CBLAS sgemm and thread count.
struct Blis {
  decltype(&cblas_sgemm) sgemm = nullptr;
  void (*set_num_threads)(long) = nullptr;
  std::string description = "not installed (apt-get install libblis4-openmp)";
};

Blis load_blis() {
  Blis blis;
  void* library = ::dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return blis;
  blis.sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(::dlsym(library, "cblas_sgemm"));
  blis.set_num_threads = reinterpret_cast<void (*)(long)>(::dlsym(library, "bli_thread_set_num_threads"));
  const auto version = reinterpret_cast<const char* (*)()>(::dlsym(library, "bli_info_get_version_str"));
  const auto arch_id = reinterpret_cast<int (*)()>(::dlsym(library, "bli_arch_query_id"));
  const auto arch_name = reinterpret_cast<const char* (*)(int)>(::dlsym(library, "bli_arch_string"));
  if (blis.sgemm == nullptr || blis.set_num_threads == nullptr) {
    blis = {};
    blis.description = "libblis.so.4 lacks cblas_sgemm or bli_thread_set_num_threads";
    return blis;
  }
  blis.description = std::string("BLIS ") + (version ? version() : "?") + ", kernels " +
                     (arch_id && arch_name ? arch_name(arch_id()) : "?") + " (its own choice for this CPU)";
  return blis;
}

struct Result {
  std::string impl;
  GemmShape shape;
  int threads;
  double gflops;
};

// The ways a Linear layer's y = x W^T + b can run on gpt-mini's shapes (x [M, K], W [N, K], b [N]),
// timed side by side: the product alone (beta = 0, the floor), the bias copied into every row of
// y and then a beta = 1 sgemm, oneDNN's matmul primitive with the bias as an argument (made once
// per shape), and syncgrad's linear.
struct LinearResult {
  GemmShape shape;
  int threads;
  std::map<std::string, double> ms;
};

LinearResult time_linear(const GemmShape& shape, int threads, int samples) {
  const int m = shape.m, n = shape.n, k = shape.k;
  sg::Generator generator(7);
  const sg::Tensor x = sg::randn({m, k}, {}, &generator), w = sg::randn({n, k}, {}, &generator);
  const sg::Tensor bias = sg::randn({n}, {}, &generator);
  std::vector<float> y(static_cast<size_t>(m) * n);
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = bias.data_ptr<float>();
  using dnnl::memory;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const memory::desc x_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc w_md({k, n}, memory::data_type::f32, memory::format_tag::ba);  // W^T as a view
  const memory::desc b_md({1, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc y_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(x_md, w_md, b_md, y_md), engine));
  std::map<std::string, Timer> timers;
  timers["gemm beta=0"].fn = [&] { dnnl_sgemm('N', 'T', m, n, k, 1.0f, px, k, pw, k, 0.0f, y.data(), n); };
  timers["bias rows + beta=1"].fn = [&] {
    for (int row = 0; row < m; ++row) std::memcpy(y.data() + static_cast<size_t>(row) * n, pb, n * sizeof(float));
    dnnl_sgemm('N', 'T', m, n, k, 1.0f, px, k, pw, k, 1.0f, y.data(), n);
  };
  timers["onednn matmul+bias"].fn = [&] {
    dnnl::stream stream(engine);
    matmul.execute(stream, {{DNNL_ARG_SRC, memory(x_md, engine, const_cast<float*>(px))},
                            {DNNL_ARG_WEIGHTS, memory(w_md, engine, const_cast<float*>(pw))},
                            {DNNL_ARG_BIAS, memory(b_md, engine, const_cast<float*>(pb))},
                            {DNNL_ARG_DST, memory(y_md, engine, y.data())}});
    stream.wait();
  };
  timers["sg::linear"].fn = [&] { sg::linear(x, w, bias); };
  for (auto& [name, timer] : timers) timer.calibrate();
  for (int s = 0; s < samples; ++s)
    for (auto& [name, timer] : timers) timer.sample();
  LinearResult result{shape, threads, {}};
  for (auto& [name, timer] : timers) result.ms[name] = timer.median() * 1e3;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{256, 512, 1024, 2048}, thread_counts{1, 2};
  std::vector<GemmShape> shapes = kGptMiniShapes;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sizes") == 0) sizes = parse_list(argv[i + 1]);
    else if (std::strcmp(argv[i], "--shapes") == 0) shapes = parse_shapes(argv[i + 1]);
    else if (std::strcmp(argv[i], "--threads") == 0) thread_counts = parse_list(argv[i + 1]);
  }
  std::vector<GemmShape> all_shapes;
  for (int n : sizes) all_shapes.push_back({n, n, n});
  all_shapes.insert(all_shapes.end(), shapes.begin(), shapes.end());

  constexpr int kSamples = 7;
  const Peak peak = read_peak();
  const Blis blis = load_blis();
  std::printf("CPU: %s, %.2f GHz (cpu MHz), %s = %d f32 FLOPs/cycle/core\n", peak.model.c_str(), peak.ghz,
              peak.isa.c_str(), peak.flops_per_cycle);
  std::printf("BLAS: %s\n", sg::cpu::blas_description().c_str());
  std::printf("BLIS: %s\n", blis.description.c_str());
  if (!sg::cpu::blas_available()) {
    std::printf("no BLAS library to time directly: syncgrad's GEMM is Eigen's here\n");
    return 1;
  }
  std::printf("f32 C = A B, M x N x K, median of %d samples; GFLOP/s = 2 M N K / seconds\n", kSamples);
  std::printf("load average (1 min) at start: %s\n\n", load_average().c_str());

  std::vector<std::string> impls{"syncgrad", "openblas", "onednn", "eigen"};
  if (blis.sgemm != nullptr) impls.push_back("blis");
  std::vector<Result> results;
  for (int threads : thread_counts) {
    sg::set_num_threads(threads);
    if (blis.sgemm != nullptr) blis.set_num_threads(threads);
    for (const GemmShape& shape : all_shapes) {
      const int m = shape.m, n = shape.n, k = shape.k;
      sg::Generator generator(42);
      const sg::Tensor a = sg::randn({m, k}, {}, &generator), b = sg::randn({k, n}, {}, &generator);
      std::vector<float> c(static_cast<size_t>(m) * n);
      const Eigen::MatrixXf ea = Eigen::MatrixXf::Random(m, k), eb = Eigen::MatrixXf::Random(k, n);
      Eigen::MatrixXf ec(m, n);
      const float* pa = a.data_ptr<float>();
      const float* pb = b.data_ptr<float>();
      std::map<std::string, Timer> timers;
      timers["openblas"].fn = [&] {
        sg::cpu::openblas_sgemm(false, false, m, n, k, 1.0f, pa, k, pb, n, 0.0f, c.data(), n);
      };
      timers["onednn"].fn = [&] { dnnl_sgemm('N', 'N', m, n, k, 1.0f, pa, k, pb, n, 0.0f, c.data(), n); };
      timers["syncgrad"].fn = [&] { sg::matmul(a, b); };
      timers["eigen"].fn = [&] { ec.noalias() = ea * eb; };
      if (blis.sgemm != nullptr)
        timers["blis"].fn = [&] {
          blis.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, pa, k, pb, n, 0.0f, c.data(), n);
        };
      for (auto& [name, timer] : timers) timer.calibrate();
      for (int s = 0; s < kSamples; ++s)
        for (auto& [name, timer] : timers) timer.sample();
      const double flops = 2.0 * m * n * static_cast<double>(k);
      for (const std::string& impl : impls)
        results.push_back({impl, shape, threads, flops / timers[impl].median() / 1e9});
    }
  }

  const auto openblas_gflops = [&](const GemmShape& shape, int threads) {
    for (const Result& r : results)
      if (r.impl == "openblas" && r.shape.str() == shape.str() && r.threads == threads) return r.gflops;
    return 0.0;
  };
  std::printf("%-9s %16s %7s %10s %14s %10s %8s\n", "impl", "M x N x K", "threads", "GFLOP/s", "vs OpenBLAS", "peak",
              "of peak");
  for (const Result& r : results)
    std::printf("%-9s %16s %7d %10.1f %13.1f%% %10.0f %7.1f%%\n", r.impl.c_str(), r.shape.str().c_str(), r.threads,
                r.gflops, 100 * r.gflops / openblas_gflops(r.shape, r.threads), peak.gflops(r.threads),
                100 * r.gflops / peak.gflops(r.threads));
  std::printf("load average (1 min) at end: %s\n\n", load_average().c_str());
  for (int threads : thread_counts)
    std::printf(
        "{\"bench\":\"gemm_peak\",\"threads\":%d,\"model\":\"%s\",\"ghz\":%.3f,\"flops_per_cycle\":%d,\"gflops\":%.1f}"
        "\n",
        threads, peak.model.c_str(), peak.ghz, peak.flops_per_cycle, peak.gflops(threads));
  std::printf("\nLinear with bias, y = x W^T + b (M x N x K: x [M, K], W [N, K]), ms per call, median of %d\n",
              kSamples);
  std::vector<LinearResult> linear_results;
  for (int threads : thread_counts) {
    sg::set_num_threads(threads);
    for (const GemmShape& shape : shapes) {
      sg::NoGradGuard no_grad;
      linear_results.push_back(time_linear(shape, threads, kSamples));
      const LinearResult& r = linear_results.back();
      std::printf("%16s threads %d:", shape.str().c_str(), threads);
      for (const auto& [name, ms] : r.ms) std::printf("  %s %.3f", name.c_str(), ms);
      std::printf("\n");
    }
  }
  std::printf("load average (1 min) at end: %s\n\n", load_average().c_str());
  for (const LinearResult& r : linear_results)
    for (const auto& [name, ms] : r.ms)
      std::printf("{\"bench\":\"linear_bias\",\"impl\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"threads\":%d,\"ms\":%.4f}\n",
                  name.c_str(), r.shape.m, r.shape.n, r.shape.k, r.threads, ms);
  for (const Result& r : results) {
    const double reference = openblas_gflops(r.shape, r.threads);
    std::printf(
        "{\"bench\":\"gemm\",\"impl\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"threads\":%d,\"gflops\":%.2f,"
        "\"openblas_gflops\":%.2f,\"ratio\":%.4f,\"peak_gflops\":%.1f}\n",
        r.impl.c_str(), r.shape.m, r.shape.n, r.shape.k, r.threads, r.gflops, reference, r.gflops / reference,
        peak.gflops(r.threads));
  }
  return 0;
}
