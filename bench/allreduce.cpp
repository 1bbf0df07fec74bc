// bench_allreduce: how fast the Gloo process group all-reduces f32 (or, with --dtype, f16 or bf16)
// tensors between processes. Run it under the launcher, one process per rank:
//   sgrun --standalone --nproc-per-node 2 build/bench/bench_allreduce --sizes 1,25,100
// Sizes are in MB of 2^20 bytes (DDP's bucket_cap_mb counts the same way). For each size rank 0
// prints the median time of --iters all-reduces and two bandwidths, as nccl-tests defines them:
//   algbw = bytes / time                       what the caller sees
//   busbw = algbw * 2 (world - 1) / world      what each link carries in a ring all-reduce, so
//                                              numbers compare across world sizes
// (GB/s = 10^9 bytes per second), then one JSON line per size:
//   {"bench":"allreduce","backend":"gloo","dtype":"f32","world":2,"mb":25,"ms":...,"algbw_gbs":...,"busbw_gbs":...}
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "parse_list.h"
#include "syncgrad.h"

namespace {

struct Options {
  std::string sizes = "1,25,100";
  int iters = 20;
  int warmup = 3;
  std::string dtype = "f32";  // f32, f16 or bf16 (DDP's fp16/bf16 compression hooks send 16-bit buckets)
  bool in_place = false;      // a tensor every rank can read, as DDP's buckets (zeros_for_all_reduce)
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int run(const Options& options) {
  sg::dist::init_process_group();
  const int world = sg::dist::get_world_size();
  const bool main_process = sg::dist::is_main_process();
  if (main_process)
    std::printf("all_reduce(SUM) of %s%s on %d processes (gloo), median of %d after %d warm-up\n%8s %10s %12s %12s\n",
                options.dtype.c_str(), options.in_place ? " in a shared buffer" : "", world, options.iters,
                options.warmup, "MB", "ms", "algbw GB/s", "busbw GB/s");
  std::vector<std::string> json;
  for (int megabytes : parse_list(options.sizes.c_str())) {
    const int64_t bytes = int64_t{megabytes} << 20;
    const sg::DType dtype = options.dtype == "f16"    ? sg::DType::f16
                            : options.dtype == "bf16" ? sg::DType::bf16
                                                      : sg::DType::f32;
    const int64_t numel = bytes / static_cast<int64_t>(sg::itemsize(dtype));
    sg::Tensor tensor = sg::randn({numel}).to(dtype);
    if (options.in_place) {
      sg::Tensor shared = sg::dist::default_group().zeros_for_all_reduce(numel, dtype);
      shared.copy_(tensor);
      tensor = shared;
    }
    std::vector<double> seconds;
    for (int i = 0; i < options.warmup + options.iters; ++i) {
      // Start together, so the time is the all-reduce's own and not a wait for a late rank.
      sg::dist::barrier();
      const auto start = std::chrono::steady_clock::now();
      sg::dist::all_reduce(tensor);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i >= options.warmup) seconds.push_back(elapsed);
    }
    const double time = median(seconds);
    const double algbw = static_cast<double>(bytes) / time / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    if (!main_process) continue;
    std::printf("%8d %10.2f %12.3f %12.3f\n", megabytes, time * 1e3, algbw, busbw);
    char line[256];
    std::snprintf(
        line, sizeof line,
        "{\"bench\":\"allreduce\",\"backend\":\"gloo\",\"dtype\":\"%s\",\"in_place\":%s,\"world\":%d,\"mb\":%d,"
        "\"ms\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f}",
        options.dtype.c_str(), options.in_place ? "true" : "false", world, megabytes, time * 1e3, algbw, busbw);
    json.push_back(line);
  }
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  sg::dist::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Gloo all_reduce time and bandwidth; run under sgrun (one process per rank)"};
  app.add_option("--sizes", options.sizes, "Comma-separated sizes in MB (2^20 bytes)")->capture_default_str();
  app.add_option("--iters", options.iters, "Timed all-reduces per size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", options.warmup, "Untimed all-reduces first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--dtype", options.dtype, "Element type: f32, f16 or bf16")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  app.add_flag("--in-place", options.in_place,
               "All-reduce a tensor of zeros_for_all_reduce, which every rank on the machine maps (DDP's buckets)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_allreduce: %s\n", error.what());
    return 1;
  }
}
