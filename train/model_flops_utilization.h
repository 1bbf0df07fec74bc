#pragma once
// defines: dist::ModelFlopsUtilization — the "mfu NN%" of the training apps' progress lines: the model
//          FLOPs the run does per second over the FMA ceiling of this machine, measured at start
//          (Note [Two peaks for MFU] in core/cpu/machine_peak.h, Note [Model FLOPs] in nn/flop_count.h).
#include <optional>
#include <string>

#include "core/cpu/machine_peak.h"
#include "train/accelerator.h"

namespace sg::dist {

class ModelFlopsUtilization {
public:
  // flops_per_item: the model FLOPs of one training step per image or token (nn::training_flops of one
  // example, models::gpt_training_flops_per_token). On a CPU, measures the machine's peak now, at the
  // thread count set: call it after sg::set_num_threads, where every process of the run gets there at
  // about the same time, so that each measures the cores it will train on. On a GPU nothing is measured
  // and nothing reported: syncgrad measures no GPU peak.
  ModelFlopsUtilization(const Accelerator& accelerator, double flops_per_item);

  // ", peak per process: FMA ceiling ... GFLOP/s (...), GEMM n=1024 ... GFLOP/s, N thread(s)" for the
  // start line; "" on a GPU.
  std::string peak_note() const;
  // ", mfu 12%" for a rate of items_per_second summed over all processes; "" on a GPU.
  std::string progress_note(double items_per_second) const;

private:
  double flops_per_item_;
  int processes_;
  std::optional<cpu::MachinePeak> peak_;  // of one process; none on a GPU
};

}  // namespace sg::dist
