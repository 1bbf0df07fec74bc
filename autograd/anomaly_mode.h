#pragma once
// defines: set_detect_anomaly, is_anomaly_enabled, is_anomaly_check_nan_enabled,
//          DetectAnomalyGuard — PyTorch's anomaly mode; ModulePathScope, current_module_path —
//          the module a forward op ran in; ForwardRecord, check_forward_output,
//          check_backward_outputs — what the mode records and checks.
//
// Note [Anomaly mode]
// A NaN in a loss is usually born far from where it is seen. In anomaly mode:
// - record() (autograd/function.cpp) gives each new node a ForwardRecord: the forward op's name,
//   its inputs' dtypes and shapes, and the module path it ran in (`blocks.1.attn.c_proj`), which
//   nn::Module's call operator pushes through ModulePathScope;
// - with check_nan, record() also fails at the first op whose output holds inf or NaN while all
//   its inputs are finite (PyTorch checks backward only; checking the forward too names the op
//   that made the NaN rather than the first backward formula that multiplies by it);
// - with check_nan, the engine (autograd/engine.cpp) fails at the first node whose gradient for
//   one of its inputs holds inf or NaN, naming the node and its ForwardRecord.
// Off (the default), each node costs one branch in record() and one in the engine. The switch is
// process-wide, as in PyTorch; the module path is per thread, like the forward that pushes it.
#include <memory>
#include <string>

#include "core/tensor.h"

namespace sg::autograd {

// Turns anomaly mode on or off for every thread. With check_nan false, nodes still record where
// they came from (for other errors' messages) but no output is checked.
void set_detect_anomaly(bool enabled, bool check_nan = true);
bool is_anomaly_enabled();

// "nan" or "inf" when floating-point `t` holds such a value; null when every value is finite or
// `t` is undefined or not floating point. Anomaly mode's check, and the one before a save.
const char* nonfinite_kind(const Tensor& t);
bool is_anomaly_check_nan_enabled();  // enabled and checking

// While alive, anomaly mode is on (PyTorch's `with torch.autograd.detect_anomaly():`). Restores
// the previous mode on exit, exception or not.
class DetectAnomalyGuard {
public:
  explicit DetectAnomalyGuard(bool check_nan = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

private:
  bool previous_enabled_;
  bool previous_check_nan_;
};

// While alive, forward ops on this thread run in the module named `path` (a dotted name such as
// `blocks.1.attn`, with its class name); nn::Module's call operator pushes one per call.
class ModulePathScope {
public:
  explicit ModulePathScope(std::string path);
  ~ModulePathScope();
  ModulePathScope(const ModulePathScope&) = delete;
  ModulePathScope& operator=(const ModulePathScope&) = delete;
};
// The innermost module path on this thread; empty outside any module.
const std::string& current_module_path();

// Where a node came from, recorded in anomaly mode only.
struct ForwardRecord {
  std::string op;      // "Sqrt" for SqrtBackward
  std::string inputs;  // "f32[4, 8], f32[8]"
  std::string module;  // "blocks.1.attn (CausalSelfAttention)", or "" outside any module
};
std::unique_ptr<ForwardRecord> make_forward_record(const char* node_name, const TensorList& inputs);

// Throws naming the op, its inputs and module if `output` holds inf or NaN while every one of
// `inputs` is finite (a non-finite input means an earlier op, or the data, made it).
void check_forward_output(const ForwardRecord& record, const Tensor& output, const TensorList& inputs);

// Throws at the first of `input_grads` (the gradients node `node_name` computed for its forward
// inputs) that holds inf or NaN; `record` is null for a node created outside anomaly mode.
void check_backward_outputs(const std::string& node_name, const ForwardRecord* record, const TensorList& input_grads);

}  // namespace sg::autograd
