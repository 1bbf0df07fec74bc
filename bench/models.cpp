// bench_models: ms per training step (forward + backward + optimizer step) of the reference models
// on synthetic data, so the number measures syncgrad and not the data pipeline.
//   bench_models --model cnn --threads 1 --steps 50
//   bench_models --model gpt-mini --batch 32 --block 128 --threads 1 --steps 20
//   bench_models --model gpt-mini --generate-tokens 500      # generation tokens/s, KV cache on and off
//   bench_models --model resnet34 --image-size 224 --batch 16 --steps 5
//   bench_models --model gpt-mini --batch 64 --device cuda --amp bf16   # on a GPU, bf16 autocast
//   bench_models --model cnn --detect-anomaly      # the cost of anomaly mode (docs/debugging.md)
//   bench_models --model gpt-mini --profile        # where the step's time goes, by op kind (docs/profiling.md)
//   bench_models --model gpt-mini --checkpoint-activations   # peak_rss_mb against recomputation (docs/memory.md)
//   bench_models --model resnet34 --image-size 128 --batch 32 --checkpoint-activations   # each block recomputed
//   bench_models --model cnn --step-times          # every timed step's ms too (bench/ddp_efficiency.py pairs them)
// Ends with one JSON line per run: {"bench":"train_step","model":"cnn","amp":"no","batch":64,"threads":1,
// "ms_per_step":...,"peak_rss_mb":...,"loss_first":...,"loss_last":...} (GPT models add "block" and
// "tokens_per_s", the CNNs and ResNets "images_per_s", the ResNets "image_size"); the losses are those of
// the first and the last step, "skipped_steps" the steps the f16 loss scaler skipped. "model_gflop" is the
// model FLOPs of one step (Note [Model FLOPs] in nn/flop_count.h; all processes), "gflops" those per
// second, and on a CPU "mfu" and "mfu_gemm" divide them by the FMA ceiling ("fma_peak_gflops") and the
// GEMM rate ("gemm_gflops") this process measured after the timed steps at the same thread count, times
// the processes (Note [Two peaks for MFU] in core/cpu/machine_peak.h); on a GPU those four are null. The PyTorch
// counterparts are bench/reference/cnn_torch.py, gpt_torch.py and resnet_torch.py, which take the same
// --device and --amp.
// Under the launcher (sgrun --nproc-per-node 2 bench_models ...) every process trains its own
// batch through DDP; rank 0 reports the total items/s and how long DDP waited for its all-reduces at
// the end of backward. --device cuda times the step on a GPU (one per process under sgrun, DDP over
// NCCL); each timed step then ends by waiting for the GPU. --step-times adds, before that line, one
// more: {"bench":"step_times","ms":[...]}, every timed step's milliseconds in order.
//
// Each model is one function that builds a Workload (model, optimizer, one step); adding a model is
// adding such a function and its line in workloads().
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "apps/ddp_flags.h"
#include "autograd/anomaly_mode.h"
#include "core/cpu/blas.h"
#include "core/cpu/machine_peak.h"
#include "core/cuda_runtime/runtime.h"
#include "models/cnn.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "nn/flop_count.h"
#include "nn/functional.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "syncgrad.h"
#include "train/accelerator.h"

namespace {

struct Options {
  std::string model = "cnn";
  int threads = 1;
  int steps = 50;
  int warmup = 5;
  int64_t batch = 64;
  int64_t block = 128;          // GPT models: tokens per sequence
  int64_t vocab = 96;           // GPT models: the vocabulary (about the fortunes corpus's)
  int64_t generate_tokens = 0;  // GPT models: time generation of this many tokens instead of training
  int64_t image_size = 224;     // ResNets: the side of the square images
  double bucket_mb = 25;
  int check_replicas_every = 0;
  std::string comm_hook = "no";
  std::string device = "auto";
  std::string amp = "no";  // the Accelerator's mixed_precision: no, f16 or bf16
  bool tf32 = false;       // GPU: f32 matrix products and convolutions may round to TF32
  bool detect_anomaly = false;
  bool profile = false;                 // profile the timed steps and print the share of each op kind
  bool checkpoint_activations = false;  // GPT models and ResNets: each block recomputed in backward
  bool step_times = false;              // print every timed step's milliseconds as a JSON line
};

// One training step's loss, and whether the optimizer stepped (the f16 loss scaler skips a step whose
// gradients overflowed).
struct StepResult {
  sg::Tensor loss;
  bool stepped;
};

// What one model's benchmark needs: the (prepared) model, its optimizer, and one training step
// (forward under the accelerator's autocast, backward and step through its scaler).
struct Workload {
  std::shared_ptr<sg::nn::Module> model;
  std::unique_ptr<sg::optim::Optimizer> optimizer;
  std::function<StepResult()> step;
  int64_t items_per_step = 0;       // per process
  double model_flops_per_step = 0;  // per process (Note [Model FLOPs] in nn/flop_count.h)
  std::string items = "images";
  std::string extra_json;  // model-specific fields of the JSON line
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// JSON has no inf or NaN: a diverged loss is written as null.
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// Model FLOPs of a training step on `batch` examples of `example_shape`, counted on one example (they
// grow linearly with the batch) before the model moves to its device.
double training_flops_per_step(sg::nn::Module& model, sg::Shape example_shape, int64_t batch) {
  example_shape.insert(example_shape.begin(), 1);
  return static_cast<double>(sg::nn::training_flops(model, sg::zeros(example_shape))) * static_cast<double>(batch);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// The Fashion-MNIST CNN or BasicNet, Adam at lr 0.005, on a random batch of images.
Workload fashion_mnist_workload(const Options& options, sg::dist::Accelerator& accelerator) {
  SG_CHECK(!options.checkpoint_activations, "--checkpoint-activations: ", options.model,
           " has no checkpointed variant (the GPT models and the ResNets have)");
  Workload work;
  const std::shared_ptr<sg::nn::Module> model = sg::models::make_fashion_mnist_model(options.model);
  work.model_flops_per_step = training_flops_per_step(*model, {1, 28, 28}, options.batch);
  work.model = accelerator.prepare(model);
  work.optimizer = std::make_unique<sg::optim::Adam>(work.model->parameters(), sg::optim::AdamOptions{.lr = 0.005});
  sg::Generator data_generator(1 + accelerator.process_index());  // each process its own batch
  // Drawn on the CPU, so every device trains on the same images.
  const sg::Tensor input = sg::randn({options.batch, 1, 28, 28}, {}, &data_generator).to(accelerator.device());
  const sg::Tensor target =
      sg::randint(0, 10, {options.batch}, {sg::DType::i64}, &data_generator).to(accelerator.device());
  const bool log_probabilities = options.model == "basicnet";
  work.step = [&accelerator, &model = *work.model, &optimizer = *work.optimizer, input, target, log_probabilities] {
    optimizer.zero_grad();
    sg::Tensor loss;
    {
      const auto autocast = accelerator.autocast();
      const sg::Tensor output = model(input);
      loss = log_probabilities ? sg::nn::functional::nll_loss(output, target)
                               : sg::nn::functional::cross_entropy(output, target);
    }
    accelerator.backward(loss);
    return StepResult{loss, accelerator.step(optimizer)};
  };
  work.items_per_step = options.batch;
  return work;
}

sg::models::GPTConfig gpt_config(const Options& options) {
  return {.model_type = options.model, .vocab_size = options.vocab, .block_size = options.block};
}

// minGPT as the recipe trains it: the recipe's AdamW groups, clip_grad_norm_(1.0), dropout 0.1, f32,
// on random tokens.
Workload gpt_workload(const Options& options, sg::dist::Accelerator& accelerator) {
  Workload work;
  auto gpt = std::make_shared<sg::models::GPT>(gpt_config(options));
  gpt->activation_checkpointing = options.checkpoint_activations;
  work.optimizer = sg::models::create_optimizer(*gpt, {});
  work.model_flops_per_step =
      sg::models::gpt_training_flops_per_token(gpt->config) * static_cast<double>(options.batch * options.block);
  work.model = accelerator.prepare(gpt);
  sg::Generator data_generator(1 + accelerator.process_index());
  const sg::Tensor idx =
      sg::randint(0, options.vocab, {options.batch, options.block}, {sg::DType::i64}, &data_generator)
          .to(accelerator.device());
  const sg::Tensor targets =
      sg::randint(0, options.vocab, {options.batch, options.block}, {sg::DType::i64}, &data_generator)
          .to(accelerator.device());
  work.step = [&accelerator, &model = *work.model, &optimizer = *work.optimizer, params = work.model->parameters(), idx,
               targets] {
    optimizer.zero_grad();
    sg::Tensor loss;
    {
      const auto autocast = accelerator.autocast();
      loss = sg::models::gpt_loss(model(idx), targets);
    }
    accelerator.backward(loss);
    accelerator.clip_grad_norm_(params, 1.0);
    return StepResult{loss, accelerator.step(optimizer)};
  };
  work.items_per_step = options.batch * options.block;
  work.items = "tokens";
  work.extra_json = ",\"block\":" + std::to_string(options.block);
  return work;
}

// A ResNet as apps/train_resnet trains it (the recipe's 5 classes, SGD with momentum 0.9 and
// weight decay 0.005, cross-entropy, f32) on random images; bench/reference/resnet_torch.py is
// torchvision's step.
Workload resnet_workload(const Options& options, sg::dist::Accelerator& accelerator) {
  Workload work;
  constexpr int64_t kClasses = 5;
  const std::shared_ptr<sg::models::ResNet> resnet = sg::models::make_resnet(options.model, {.num_classes = kClasses});
  resnet->activation_checkpointing = options.checkpoint_activations;
  work.model_flops_per_step =
      training_flops_per_step(*resnet, {3, options.image_size, options.image_size}, options.batch);
  work.model = accelerator.prepare(resnet);
  work.optimizer = std::make_unique<sg::optim::SGD>(
      work.model->parameters(), sg::optim::SGDOptions{.lr = 0.001, .momentum = 0.9, .weight_decay = 0.005});
  sg::Generator data_generator(1 + accelerator.process_index());
  const sg::Tensor input = sg::randn({options.batch, 3, options.image_size, options.image_size}, {}, &data_generator)
                               .to(accelerator.device());
  const sg::Tensor target =
      sg::randint(0, kClasses, {options.batch}, {sg::DType::i64}, &data_generator).to(accelerator.device());
  work.step = [&accelerator, &model = *work.model, &optimizer = *work.optimizer, input, target] {
    optimizer.zero_grad();
    sg::Tensor loss;
    {
      const auto autocast = accelerator.autocast();
      loss = sg::nn::functional::cross_entropy(model(input), target);
    }
    accelerator.backward(loss);
    return StepResult{loss, accelerator.step(optimizer)};
  };
  work.items_per_step = options.batch;
  work.extra_json = ",\"image_size\":" + std::to_string(options.image_size);
  return work;
}

// The kinds of op the profile of a step is summed into, by the category of each event.
const char* op_kind(sg::profiler::Category category) {
  using sg::profiler::Category;
  switch (category) {
    case Category::gemm: return "gemm";
    case Category::conv: return "conv";
    case Category::attention: return "attention";
    case Category::pointwise: return "pointwise";
    case Category::norm: return "norm";
    case Category::random: return "dropout/random";
    case Category::copy: return "copies";
    case Category::optimizer:
    case Category::optim: return "optimizer";
    default: return "other";
  }
}

// The share of the profiled steps' wall time each op kind took (self times on the training thread,
// so nothing is counted twice), then the key_averages table.
void print_op_kinds(const sg::profiler::ProfileResult& result, int steps, sg::dist::Accelerator& accelerator) {
  const std::vector<int64_t> self = sg::profiler::self_times_ns(result.events);
  std::map<std::string, int64_t> by_kind;
  for (const char* kind :
       {"gemm", "conv", "attention", "pointwise", "norm", "dropout/random", "copies", "optimizer", "other"})
    by_kind[kind] = 0;
  int64_t inside_events = 0;
  for (size_t i = 0; i < result.events.size(); ++i) {
    if (result.events[i].thread != result.profiling_thread) continue;
    by_kind[op_kind(result.events[i].category)] += self[i];
    inside_events += self[i];
  }
  const auto wall = static_cast<double>(result.end_ns - result.start_ns);
  std::vector<std::pair<std::string, int64_t>> rows(by_kind.begin(), by_kind.end());
  rows.emplace_back("(outside any op)", result.end_ns - result.start_ns - inside_events);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  accelerator.print("Share of the step by op kind (self time on the training thread, ", steps, " profiled steps):");
  for (const auto& [kind, ns] : rows) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-18s %6.1f%%  %9.3f ms/step", kind.c_str(),
                  100.0 * static_cast<double>(ns) / wall, static_cast<double>(ns) / 1e6 / steps);
    accelerator.print(line);
  }
  accelerator.print(sg::profiler::key_averages(result).table(15));
}

using WorkloadMaker = std::function<Workload(const Options&, sg::dist::Accelerator&)>;

const std::map<std::string, WorkloadMaker>& workloads() {
  static const std::map<std::string, WorkloadMaker> table = {
      {"cnn", fashion_mnist_workload}, {"basicnet", fashion_mnist_workload}, {"gpt-nano", gpt_workload},
      {"gpt-micro", gpt_workload},     {"gpt-mini", gpt_workload},           {"resnet18", resnet_workload},
      {"resnet34", resnet_workload},
  };
  return table;
}

// {"bench":"step_times","ms":[12.91,13.02,...]}: each timed step's wall time, in the order they ran.
std::string step_times_json(const std::vector<double>& milliseconds) {
  std::string json = "{\"bench\":\"step_times\",\"ms\":[";
  for (size_t i = 0; i < milliseconds.size(); ++i) json += (i == 0 ? "" : ",") + json_number(milliseconds[i]);
  return json + "]}";
}

int train_steps(const Options& options, sg::dist::Accelerator& accelerator) {
  Workload work = workloads().at(options.model)(options, accelerator);
  accelerator.prepare(*work.optimizer);  // the scaler unscales its gradients before clipping under f16
  const bool on_gpu = accelerator.device().is_cuda();
  const auto* ddp = dynamic_cast<const sg::dist::DistributedDataParallel*>(work.model.get());
  std::vector<double> milliseconds, ddp_wait, all_reduce, backward;
  const int last_step = options.warmup + options.steps - 1;
  double first_loss = 0, last_loss = 0;  // a loss that does not fall says the step does not train
  int skipped_steps = 0;
  std::unique_ptr<sg::profiler::Profile> profile;
  for (int step = 0; step <= last_step; ++step) {
    if (options.profile && step == options.warmup) profile = std::make_unique<sg::profiler::Profile>();
    const auto start = std::chrono::steady_clock::now();
    const StepResult result = work.step();
    if (on_gpu) sg::cuda::synchronize();  // the host only queued the step's kernels; wait until they ran
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step == 0) first_loss = result.loss.item();
    if (step == last_step) last_loss = result.loss.item();
    skipped_steps += result.stepped ? 0 : 1;
    if (step < options.warmup) continue;
    milliseconds.push_back(elapsed);
    if (ddp != nullptr) {
      backward.push_back(ddp->last_step_times().backward_ms);
      ddp_wait.push_back(ddp->last_step_times().wait_ms);
      all_reduce.push_back(ddp->last_step_times().all_reduce_ms);
    }
  }
  if (profile) {
    profile->stop();
    print_op_kinds(profile->result(), options.steps, accelerator);
  }
  const double ms = median(milliseconds);
  // Taken before the machine's peaks are measured below: their GEMM buffers are not the model's.
  const double step_peak_rss_mb = peak_rss_mb();
  const int processes = accelerator.num_processes();
  const double items_per_second = 1000.0 * static_cast<double>(work.items_per_step * processes) / ms;
  accelerator.print(options.model, " batch ", options.batch, " x ", processes, " process(es) x ", options.threads,
                    " thread(s) on ", accelerator.device(), " (mixed precision ", options.amp, "): ", ms,
                    " ms/step (median of ", options.steps, "), ", items_per_second, " ", work.items, "/s, peak RSS ",
                    step_peak_rss_mb, " MB; loss ", first_loss, " at step 1, ", last_loss, " at step ", last_step + 1,
                    ", ", skipped_steps, " step(s) skipped by the loss scaler");
  if (!on_gpu) accelerator.print("GEMM: ", sg::cpu::blas_description());
  // Model FLOPs per second against this machine's peaks, measured now that the steps are done.
  const double model_gflop = work.model_flops_per_step * processes / 1e9;
  const double gflops = model_gflop * 1000.0 / ms;
  std::string fma_peak_json = "null", gemm_json = "null", mfu_json = "null", mfu_gemm_json = "null";
  if (on_gpu) {
    accelerator.print("model FLOPs: ", model_gflop, " GFLOP per step, ", gflops,
                      " GFLOP/s (no MFU: syncgrad measures no GPU peak)");
  } else {
    const sg::cpu::MachinePeak peak = sg::cpu::measure_machine_peak(options.threads);
    const double mfu = gflops / (peak.fma_gflops * processes), mfu_gemm = gflops / (peak.gemm_gflops * processes);
    accelerator.print("model FLOPs: ", model_gflop, " GFLOP per step, ", gflops, " GFLOP/s; MFU ", 100 * mfu,
                      "% of the FMA ceiling, ", 100 * mfu_gemm, "% of the GEMM rate (per process: ", peak.str(), ")");
    fma_peak_json = json_number(peak.fma_gflops);
    gemm_json = json_number(peak.gemm_gflops);
    mfu_json = json_number(mfu);
    mfu_gemm_json = json_number(mfu_gemm);
  }
  if (ddp != nullptr)
    accelerator.print("DDP: backward ", median(backward), " ms/step; all-reduce ", median(all_reduce),
                      " ms/step on the communication thread, of which backward waited ", median(ddp_wait),
                      " ms at its end (medians)");
  if (options.step_times) accelerator.print(step_times_json(milliseconds));
  char json[1024];
  std::snprintf(json, sizeof json,
                "{\"bench\":\"train_step\",\"impl\":\"syncgrad\",\"model\":\"%s\",\"device\":\"%s\",\"amp\":\"%s\","
                "\"tf32\":%s,"
                "\"batch\":%lld%s,\"threads\":%d,\"processes\":%d,\"ms_per_step\":%.3f,\"%s_per_s\":%.1f,"
                "\"peak_rss_mb\":%.1f,\"loss_first\":%s,\"loss_last\":%s,\"skipped_steps\":%d,\"model_gflop\":%s,"
                "\"gflops\":%s,\"fma_peak_gflops\":%s,\"gemm_gflops\":%s,\"mfu\":%s,\"mfu_gemm\":%s}",
                options.model.c_str(), accelerator.device().str().c_str(), options.amp.c_str(),
                options.tf32 ? "true" : "false", static_cast<long long>(options.batch), work.extra_json.c_str(),
                options.threads, processes, ms, work.items.c_str(), items_per_second, step_peak_rss_mb,
                json_number(first_loss).c_str(), json_number(last_loss).c_str(), skipped_steps,
                json_number(model_gflop).c_str(), json_number(gflops).c_str(), fma_peak_json.c_str(), gemm_json.c_str(),
                mfu_json.c_str(), mfu_gemm_json.c_str());
  accelerator.print(json);
  return 0;
}

// Greedy generation of --generate-tokens tokens from a one-token prompt, batch 1, KV cache on then
// off (docs/gpt.md, "The KV cache"): one JSON line each.
int generation(const Options& options, sg::dist::Accelerator& accelerator) {
  SG_CHECK(options.model.starts_with("gpt"), "bench_models: --generate-tokens needs a GPT model, got ", options.model);
  sg::models::GPT model(gpt_config(options));
  model.to(accelerator.device());
  model.eval();
  const sg::Tensor prompt = sg::zeros({1, 1}, {sg::DType::i64});
  for (const bool use_cache : {true, false}) {
    model.generate(prompt, {.max_new_tokens = 8, .use_cache = use_cache});  // warm-up
    const auto start = std::chrono::steady_clock::now();
    model.generate(prompt, {.max_new_tokens = options.generate_tokens, .use_cache = use_cache});
    if (accelerator.device().is_cuda()) sg::cuda::synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_second = static_cast<double>(options.generate_tokens) / seconds;
    accelerator.print(options.model, " block ", options.block, ": ", options.generate_tokens, " new tokens, KV cache ",
                      use_cache ? "on" : "off", ": ", tokens_per_second, " tokens/s");
    char json[320];
    std::snprintf(json, sizeof json,
                  "{\"bench\":\"generate\",\"impl\":\"syncgrad\",\"model\":\"%s\",\"block\":%lld,\"new_tokens\":%lld,"
                  "\"kv_cache\":%s,\"threads\":%d,\"tokens_per_s\":%.1f}",
                  options.model.c_str(), static_cast<long long>(options.block),
                  static_cast<long long>(options.generate_tokens), use_cache ? "true" : "false", options.threads,
                  tokens_per_second);
    accelerator.print(json);
  }
  return 0;
}

int run(const Options& options) {
  sg::dist::AcceleratorOptions accelerator_options;
  accelerator_options.ddp.bucket_cap_mb = options.bucket_mb;
  accelerator_options.ddp.check_replicas_every = options.check_replicas_every;
  accelerator_options.comm_hook = options.comm_hook;
  accelerator_options.device = options.device;
  accelerator_options.mixed_precision = options.amp;
  sg::dist::Accelerator accelerator(accelerator_options);
  sg::cuda::set_allow_tf32(options.tf32);
  sg::set_num_threads(options.threads);
  sg::manual_seed(0);
  sg::autograd::set_detect_anomaly(options.detect_anomaly);
  return options.generate_tokens > 0 ? generation(options, accelerator) : train_steps(options, accelerator);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::vector<std::string> names;
  for (const auto& entry : workloads()) names.push_back(entry.first);
  CLI::App app{"Training-step benchmark of syncgrad's reference models"};
  app.add_option("--model", options.model, "The model")->check(CLI::IsMember(names))->capture_default_str();
  app.add_option("--threads", options.threads, "Intra-op threads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", options.steps, "Timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", options.warmup, "Untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--batch", options.batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--block", options.block, "GPT models: tokens per sequence (block_size)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--vocab", options.vocab, "GPT models: vocabulary size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--image-size", options.image_size, "ResNets: the side of the square input images")
      ->check(CLI::Range(int64_t{32}, int64_t{4096}))
      ->capture_default_str();
  app.add_option("--generate-tokens", options.generate_tokens,
                 "GPT models: time generating this many tokens (KV cache on, then off) instead of training")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--device", options.device, "auto (a GPU when CUDA is available), cpu, or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--amp", options.amp, "Mixed precision: no, f16 (autocast + loss scaler) or bf16 (autocast)")
      ->check(CLI::IsMember({"no", "f16", "bf16"}))
      ->capture_default_str();
  add_bucket_mb_option(app, options.bucket_mb);
  add_comm_hook_option(app, options.comm_hook);
  app.add_option("--check-replicas-every", options.check_replicas_every,
                 "Under sgrun: DDP compares the replicas every N steps (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--tf32", options.tf32, "GPU: let f32 matrix products and convolutions use TF32");
  app.add_flag("--detect-anomaly", options.detect_anomaly, "Train in anomaly mode (every op and gradient checked)");
  app.add_flag("--profile", options.profile,
               "Profile the timed steps: print each op kind's share of the step and the key_averages table");
  app.add_flag("--checkpoint-activations", options.checkpoint_activations,
               "GPT models and ResNets: checkpoint each (transformer or residual) block: its activations are "
               "recomputed in backward (docs/memory.md)");
  app.add_flag("--step-times", options.step_times,
               "Also print every timed step's milliseconds as one JSON line (bench/ddp_efficiency.py pairs them)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_models: %s\n", error.what());
    return 1;
  }
}
