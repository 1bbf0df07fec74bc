#include "train/model_flops_utilization.h"

#include <cmath>

namespace sg::dist {

ModelFlopsUtilization::ModelFlopsUtilization(const Accelerator& accelerator, double flops_per_item)
    : flops_per_item_(flops_per_item),
      processes_(accelerator.num_processes()) {
  if (!accelerator.device().is_cuda()) peak_ = cpu::measure_machine_peak();
}

std::string ModelFlopsUtilization::peak_note() const { return peak_ ? ", peak per process: " + peak_->str() : ""; }

std::string ModelFlopsUtilization::progress_note(double items_per_second) const {
  if (!peak_) return "";
  const double ceiling_flops = peak_->fma_gflops * 1e9 * processes_;
  return ", mfu " + std::to_string(std::lround(100 * items_per_second * flops_per_item_ / ceiling_flops)) + "%";
}

}  // namespace sg::dist
