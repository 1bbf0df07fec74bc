// Anomaly mode: see Note [Anomaly mode] in autograd/anomaly_mode.h.
#include "autograd/anomaly_mode.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/dtype.h"
#include "core/error.h"

namespace sg::autograd {

namespace {

std::atomic<bool> anomaly_enabled{false};
std::atomic<bool> anomaly_check_nan{true};

thread_local std::vector<std::string> module_paths;

std::string describe_module(const std::string& module) {
  return module.empty() ? std::string("outside any module") : "in module " + module;
}

std::string describe_origin(const ForwardRecord* record) {
  if (record == nullptr)
    return "it was created outside anomaly mode, so its forward op is unknown (run the forward under "
           "DetectAnomalyGuard too)";
  return "it was created by the forward op " + record->op + " on inputs (" + record->inputs + ") " +
         describe_module(record->module);
}

}  // namespace

// x * 0 is 0 for every finite x and NaN otherwise, so the sum cannot overflow; only when it is
// not finite does a second sum tell NaN (NaN in |x|) from inf.
const char* nonfinite_kind(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return nullptr;
  NoGradGuard no_grad;
  const Tensor values = t.detach();
  if (std::isfinite((values * 0.0).sum().item())) return nullptr;
  return std::isnan(values.abs().to(DType::f64).sum().item()) ? "nan" : "inf";
}

void set_detect_anomaly(bool enabled, bool check_nan) {
  anomaly_check_nan = check_nan;
  anomaly_enabled = enabled;
}
bool is_anomaly_enabled() { return anomaly_enabled; }
bool is_anomaly_check_nan_enabled() { return anomaly_enabled && anomaly_check_nan; }

DetectAnomalyGuard::DetectAnomalyGuard(bool check_nan)
    : previous_enabled_(anomaly_enabled),
      previous_check_nan_(anomaly_check_nan) {
  set_detect_anomaly(true, check_nan);
}
DetectAnomalyGuard::~DetectAnomalyGuard() { set_detect_anomaly(previous_enabled_, previous_check_nan_); }

ModulePathScope::ModulePathScope(std::string path) { module_paths.push_back(std::move(path)); }
ModulePathScope::~ModulePathScope() { module_paths.pop_back(); }

const std::string& current_module_path() {
  static const std::string none;
  return module_paths.empty() ? none : module_paths.back();
}

std::unique_ptr<ForwardRecord> make_forward_record(const char* node_name, const TensorList& inputs) {
  auto record = std::make_unique<ForwardRecord>();
  record->op = node_name;
  const std::string suffix = "Backward";
  if (record->op.ends_with(suffix)) record->op.resize(record->op.size() - suffix.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) record->inputs += ", ";
    const Tensor& t = inputs[i];
    record->inputs += t.defined() ? dtype_name(t.dtype()) + shape_str(t.sizes()) : std::string("undefined");
  }
  record->module = current_module_path();
  return record;
}

void check_forward_output(const ForwardRecord& record, const Tensor& output, const TensorList& inputs) {
  const char* kind = nonfinite_kind(output);
  if (kind == nullptr) return;
  for (const auto& input : inputs)
    if (nonfinite_kind(input) != nullptr) return;  // not born here
  SG_FAIL("anomaly mode: the forward op ", record.op, " produced ", kind, " values from finite inputs (", record.inputs,
          ") ", describe_module(record.module), "; its output has shape ", shape_str(output.sizes()));
}

void check_backward_outputs(const std::string& node_name, const ForwardRecord* record, const TensorList& input_grads) {
  for (size_t i = 0; i < input_grads.size(); ++i) {
    const char* kind = nonfinite_kind(input_grads[i]);
    if (kind == nullptr) continue;
    SG_FAIL("anomaly mode: ", node_name, " returned ", kind, " values in its ", i,
            "th output (the gradient for the forward op's input ", i, ", shape ", shape_str(input_grads[i].sizes()),
            "); ", describe_origin(record));
  }
}

}  // namespace sg::autograd
