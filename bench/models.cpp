// bench_models: ms per training step (forward + backward + optimizer step) of the reference models
// on synthetic data, so the number measures syncgrad and not the data pipeline.
//   bench_models --model cnn --threads 1 --steps 50
// Ends with one JSON line per run: {"bench":"train_step","model":"cnn","batch":64,"threads":1,"ms_per_step":...}
// The PyTorch counterpart is bench/reference/cnn_torch.py.
// Under the launcher (sgrun --nproc-per-node 2 bench_models ...) every process trains its own
// batch of --batch images through DDP; rank 0 reports the total images/s and how long DDP
// waited for its all-reduces at the end of backward. --device cuda times the step on a GPU (one
// per process under sgrun, DDP over NCCL); each timed step then ends by waiting for the GPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cuda/runtime.h"
#include "dist/accelerator.h"
#include "models/cnn.h"
#include "nn/functional.h"
#include "optim/adam.h"
#include "syncgrad.h"

namespace {

struct Options {
  std::string model = "cnn";
  int threads = 1;
  int steps = 50;
  int warmup = 5;
  int64_t batch = 64;
  double bucket_mb = 25;
  std::string device = "auto";
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int run(const Options& options) {
  sg::dist::AcceleratorOptions accelerator_options;
  accelerator_options.ddp.bucket_cap_mb = options.bucket_mb;
  accelerator_options.device = options.device;
  sg::dist::Accelerator accelerator(accelerator_options);
  sg::set_num_threads(options.threads);
  sg::manual_seed(0);
  auto model = accelerator.prepare(sg::models::make_fashion_mnist_model(options.model));
  sg::optim::Adam optimizer(model->parameters(), {.lr = 0.005});
  sg::Generator data_generator(1 + accelerator.process_index());  // each process its own batch
  // Drawn on the CPU, so every device trains on the same images.
  const sg::Tensor input = sg::randn({options.batch, 1, 28, 28}, {}, &data_generator).to(accelerator.device());
  const sg::Tensor target =
      sg::randint(0, 10, {options.batch}, {sg::DType::i64}, &data_generator).to(accelerator.device());
  const bool on_gpu = accelerator.device().is_cuda();
  const bool log_probabilities = options.model == "basicnet";
  const auto* ddp = dynamic_cast<const sg::dist::DistributedDataParallel*>(model.get());

  std::vector<double> milliseconds, ddp_wait, all_reduce, backward;
  for (int step = 0; step < options.warmup + options.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    const sg::Tensor output = (*model)(input);
    sg::Tensor loss = log_probabilities ? sg::nn::functional::nll_loss(output, target)
                                        : sg::nn::functional::cross_entropy(output, target);
    loss.backward();
    optimizer.step();
    if (on_gpu) sg::cuda::synchronize();  // the host only queued the step's kernels; wait until they ran
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step < options.warmup) continue;
    milliseconds.push_back(elapsed);
    if (ddp != nullptr) {
      backward.push_back(ddp->reducer().last_step_times().backward_ms);
      ddp_wait.push_back(ddp->reducer().last_step_times().wait_ms);
      all_reduce.push_back(ddp->reducer().last_step_times().all_reduce_ms);
    }
  }
  const double ms = median(milliseconds);
  const int processes = accelerator.num_processes();
  const double images_per_second = 1000.0 * static_cast<double>(options.batch * processes) / ms;
  accelerator.print(options.model, " batch ", options.batch, " x ", processes, " process(es) x ", options.threads,
                    " thread(s) on ", accelerator.device(), ": ", ms, " ms/step (median of ", options.steps, "), ",
                    images_per_second, " img/s");
  if (!on_gpu) accelerator.print("GEMM: ", sg::cpu::blas_description());
  if (ddp != nullptr)
    accelerator.print("DDP: backward ", median(backward), " ms/step; all-reduce ", median(all_reduce),
                      " ms/step on the communication thread, of which backward waited ", median(ddp_wait),
                      " ms at its end (medians)");
  char json[512];
  std::snprintf(json, sizeof json,
                "{\"bench\":\"train_step\",\"impl\":\"syncgrad\",\"model\":\"%s\",\"device\":\"%s\",\"batch\":%lld,"
                "\"threads\":%d,\"processes\":%d,\"ms_per_step\":%.3f,\"images_per_s\":%.1f}",
                options.model.c_str(), accelerator.device().str().c_str(), static_cast<long long>(options.batch),
                options.threads, processes, ms, images_per_second);
  accelerator.print(json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Training-step benchmark of syncgrad's reference models"};
  app.add_option("--model", options.model, "cnn or basicnet")->check(CLI::IsMember({"cnn", "basicnet"}))->capture_default_str();
  app.add_option("--threads", options.threads, "Intra-op threads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", options.steps, "Timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", options.warmup, "Untimed steps first")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--batch", options.batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--device", options.device, "auto (a GPU when CUDA is available), cpu, or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  app.add_option("--bucket-mb", options.bucket_mb, "Under sgrun: DDP's gradient bucket size in MB")
      ->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_models: %s\n", error.what());
    return 1;
  }
}
