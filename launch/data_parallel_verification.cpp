#include "launch/data_parallel_verification.h"

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "launch/data_parallel_picture.h"
#include "launch/launcher.h"

namespace sg::dist {

namespace {

// The largest |x| over the elements of `t`, in f64; 0 for an empty tensor.
double largest_magnitude(const Tensor& t) { return t.numel() == 0 ? 0 : t.to(DType::f64).abs().max().item(); }

// The largest |a - b| over the elements of two tensors of one shape.
double largest_difference(const Tensor& a, const Tensor& b) {
  return largest_magnitude(a.to(DType::f64) - b.to(DType::f64));
}

const Tensor& tensor_of(const std::map<std::string, Tensor>& state, const std::string& name, const Tensor& initial,
                        const char* run) {
  const auto found = state.find(name);
  SG_CHECK(found != state.end(), "sgrun --verify: the ", run, " run saved no tensor ", name);
  SG_CHECK(found->second.sizes() == initial.sizes(), "sgrun --verify: ", name, " has shape ",
           shape_str(found->second.sizes()), " after the ", run, " run, ", shape_str(initial.sizes()), " initially");
  return found->second;
}

constexpr double kNegligible = 1e-6;  // ~8 units in the last place of an f32

// The saved name without the checkpoint's "model." prefix.
std::string display_name(const std::string& name) {
  constexpr std::string_view prefix = "model.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

std::map<std::string, Tensor> load_state(const std::string& path, const char* run) {
  SG_CHECK(std::filesystem::exists(path), "sgrun --verify: the ", run, " run ended without saving its state to ", path,
           ": the program must train through dist::Accelerator (prepare its model and call accelerator.step) for "
           "--verify to stop it and read its parameters");
  return load_safetensors(path).tensors;
}

std::string scientific(double value) {
  std::ostringstream text;
  text << std::scientific << std::setprecision(2) << value;
  return text.str();
}

// Removes a folder and everything in it when it goes out of scope, errors or not.
struct RemovedAtExit {
  std::filesystem::path path;
  ~RemovedAtExit() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

std::vector<TensorDrift> compare_data_parallel(const std::map<std::string, Tensor>& initial,
                                               const std::map<std::string, Tensor>& many_ranks,
                                               const std::map<std::string, Tensor>& one_rank, double tolerance) {
  std::vector<TensorDrift> drifts;
  for (const auto& [name, start] : initial) {
    const Tensor& many = tensor_of(many_ranks, name, start, "many-rank");
    const Tensor& one = tensor_of(one_rank, name, start, "one-rank");
    TensorDrift drift{display_name(name), largest_difference(many, one), largest_difference(one, start)};
    // Below kNegligible of the tensor's own size a difference is the last bits of its elements:
    // a tensor that hardly moved (its gradient is rounding noise) may differ by all of its update.
    const double negligible = kNegligible * largest_magnitude(one);
    drift.differs = drift.largest_difference > tolerance * drift.largest_update + negligible;
    drifts.push_back(std::move(drift));
  }
  return drifts;
}

std::string data_parallel_report(const std::vector<TensorDrift>& drifts, int ranks, int64_t steps, double tolerance) {
  std::ostringstream report;
  report << "sgrun --verify " << ranks << ": " << steps << " steps on " << ranks << " ranks against 1 rank with "
         << ranks << "x the batch (the same samples in every step)\n";
  size_t width = 6;
  for (const TensorDrift& drift : drifts) width = std::max(width, drift.name.size());
  report << std::left << std::setw(static_cast<int>(width) + 2) << "tensor"
         << "difference  update      ratio       verdict\n";
  int differing = 0;
  for (const TensorDrift& drift : drifts) {
    const double ratio = drift.largest_update > 0       ? drift.largest_difference / drift.largest_update
                         : drift.largest_difference > 0 ? INFINITY
                                                        : 0;
    report << std::left << std::setw(static_cast<int>(width) + 2) << drift.name << std::setw(12)
           << scientific(drift.largest_difference) << std::setw(12) << scientific(drift.largest_update) << std::setw(12)
           << scientific(ratio) << (drift.differs ? "DIFFERS" : "ok") << "\n";
    differing += drift.differs ? 1 : 0;
  }
  if (differing == 0) {
    report << "Every tensor agrees within " << scientific(tolerance)
           << " of its update: the difference is float reordering, and data-parallel training here is large-batch "
              "training.\n";
    return report.str();
  }
  report << differing << " of " << drifts.size() << " tensors differ by more than " << scientific(tolerance)
         << " of their update, more than float reordering explains. The usual causes:\n"
         << "  - randomness that depends on the rank (dropout, data augmentation): each rank draws other numbers than "
            "the one-rank run does for the same samples;\n"
         << "  - BatchNorm without SyncBatchNorm: each rank normalises by its own batch's statistics "
            "(AcceleratorOptions::sync_batchnorm, --sync-bn in the apps);\n"
         << "  - a loss summed over the batch instead of averaged: DDP averages the ranks' gradients, so the ranks "
            "take 1/"
         << ranks << " of the one-rank step;\n"
         << "  - a parameter whose gradient is zero but for rounding, such as a bias right before BatchNorm (which "
            "subtracts the mean): Adam divides that noise by its own size and takes full steps in directions the "
            "rounding chose, differently in each run.\n";
  return report.str();
}

int verify_data_parallel(const LaunchOptions& options, int ranks, int64_t steps, const std::string& svg_path) {
  SG_CHECK(options.nnodes == 1, "sgrun --verify runs on one node; got --nnodes ", options.nnodes);
  SG_CHECK(ranks >= 2, "sgrun --verify N compares N ranks with one: N must be at least 2, got ", ranks);
  SG_CHECK(steps >= 1, "sgrun --verify-steps must be at least 1, got ", steps);
  std::string folder_template = (std::filesystem::temp_directory_path() / "sgrun-verify-XXXXXX").string();
  SG_CHECK(mkdtemp(folder_template.data()) != nullptr, "sgrun --verify: cannot create a folder in ",
           std::filesystem::temp_directory_path().string());
  const std::filesystem::path folder = folder_template;
  const RemovedAtExit removed{folder};
  const std::string many_path = (folder / "many-ranks.safetensors").string();
  const std::string one_path = (folder / "one-rank.safetensors").string();

  const auto run = [&](int processes, int64_t batch_scale, const std::string& output) {
    LaunchOptions run_options = options;
    run_options.nproc_per_node = processes;
    run_options.max_restarts = 0;
    run_options.extra_environment.emplace_back("SG_VERIFY_STEPS", std::to_string(steps));
    run_options.extra_environment.emplace_back("SG_VERIFY_BATCH_SCALE", std::to_string(batch_scale));
    run_options.extra_environment.emplace_back("SG_VERIFY_OUTPUT", output);
    std::fprintf(stderr, "sgrun --verify: %d step(s) on %d rank(s)%s\n", static_cast<int>(steps), processes,
                 batch_scale > 1 ? (" with " + std::to_string(batch_scale) + "x the batch").c_str() : "");
    return launch(run_options);
  };
  int status = run(ranks, 1, many_path);
  if (status == 0) status = run(1, ranks, one_path);
  if (status != 0) {
    std::fprintf(stderr, "sgrun --verify: a run failed (exit code %d); nothing compared\n", status);
    return status;
  }
  const auto initial = load_state(many_path + ".initial", "many-rank");
  const auto one_initial = load_state(one_path + ".initial", "one-rank");
  for (const auto& [name, tensor] : initial) {
    const auto other = one_initial.find(name);
    if (other != one_initial.end() && other->second.sizes() == tensor.sizes() &&
        largest_difference(tensor, other->second) == 0)
      continue;
    std::fprintf(stderr,
                 "sgrun --verify: the two runs started from different states (%s differs first): the program's "
                 "initialisation must not depend on the number of ranks (seed it the same on every run)\n",
                 display_name(name).c_str());
    return 1;
  }
  const std::vector<TensorDrift> drifts =
      compare_data_parallel(initial, load_state(many_path, "many-rank"), load_state(one_path, "one-rank"));
  std::fputs(data_parallel_report(drifts, ranks, steps).c_str(), stdout);
  if (!svg_path.empty()) {
    const std::string svg = data_parallel_svg(drifts, ranks, steps);
    write_file_atomically(svg_path, [&](const ByteWriter& write) { write(svg.data(), svg.size()); });
    std::printf("sgrun --verify: wrote %s\n", svg_path.c_str());
  }
  const bool agree = std::none_of(drifts.begin(), drifts.end(), [](const TensorDrift& drift) { return drift.differs; });
  return agree ? 0 : 1;
}

}  // namespace sg::dist
