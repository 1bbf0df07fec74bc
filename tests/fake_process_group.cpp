#include "fake_process_group.h"

#include "autograd/grad_mode.h"

namespace sg::test {

namespace {

// Done the moment it exists; its timing says it ran in no time.
class CompletedWork final : public dist::Work {
public:
  CompletedWork() : timing_{std::chrono::steady_clock::now(), std::chrono::steady_clock::now()} {}
  void wait() override {}
  bool is_completed() const override { return true; }
  Timing timing() const override { return timing_; }

private:
  Timing timing_;
};

// What `tensor` becomes when every other rank contributes zeros.
void reduce_with_zeros(Tensor& tensor, dist::ReduceOp op, int size) {
  NoGradGuard no_grad;
  switch (op) {
    case dist::ReduceOp::SUM: return;
    case dist::ReduceOp::AVG: tensor.div_(static_cast<double>(size)); return;
    case dist::ReduceOp::MAX: tensor.clamp_(0.0, std::nullopt); return;
    case dist::ReduceOp::MIN: tensor.clamp_(std::nullopt, 0.0); return;
    case dist::ReduceOp::PRODUCT: tensor.zero_(); return;
  }
}

// Rank r's part of a gather: this rank's input, zeros from the others.
void fill_gathered(std::vector<Tensor>& outputs, const Tensor& input, int rank) {
  NoGradGuard no_grad;
  for (size_t r = 0; r < outputs.size(); ++r)
    if (static_cast<int>(r) == rank) outputs[r].copy_(input);
    else outputs[r].zero_();
}

}  // namespace

dist::WorkPtr FakeProcessGroup::log(const std::string& op, const Tensor& tensor, dist::ReduceOp reduce_op) {
  calls_.push_back({op, reduce_op, tensor});
  return std::make_shared<CompletedWork>();
}

dist::WorkPtr FakeProcessGroup::start_all_reduce(Tensor& tensor, dist::ReduceOp op) {
  reduce_with_zeros(tensor, op, size());
  return log("all_reduce", tensor, op);
}

dist::WorkPtr FakeProcessGroup::start_broadcast(Tensor& tensor, int root) {
  if (rank() != root) {
    NoGradGuard no_grad;
    tensor.zero_();
  }
  return log("broadcast", tensor);
}

dist::WorkPtr FakeProcessGroup::start_reduce(Tensor& tensor, int root, dist::ReduceOp op) {
  if (rank() == root) reduce_with_zeros(tensor, op, size());
  return log("reduce", tensor, op);
}

dist::WorkPtr FakeProcessGroup::start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  fill_gathered(outputs, input, rank());
  return log("all_gather", input);
}

dist::WorkPtr FakeProcessGroup::start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  if (rank() == root) fill_gathered(outputs, input, rank());
  return log("gather", input);
}

dist::WorkPtr FakeProcessGroup::start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  NoGradGuard no_grad;
  if (rank() == root) output.copy_(inputs[static_cast<size_t>(root)]);
  else output.zero_();
  return log("scatter", output);
}

// This rank's chunk of `input`, reduced with the other ranks' zeros.
dist::WorkPtr FakeProcessGroup::start_reduce_scatter_tensor(Tensor& output, const Tensor& input, dist::ReduceOp op) {
  {
    NoGradGuard no_grad;
    output.view({output.numel()}).copy_(input.view({size(), output.numel()}).select(0, rank()));
  }
  reduce_with_zeros(output, op, size());
  return log("reduce_scatter_tensor", input, op);
}

// This rank's input in its chunk, zeros in the others'.
dist::WorkPtr FakeProcessGroup::start_all_gather_into_tensor(Tensor& output, const Tensor& input) {
  NoGradGuard no_grad;
  output.zero_();
  output.view({size(), input.numel()}).select(0, rank()).copy_(input.view({input.numel()}));
  return log("all_gather_into_tensor", input);
}

dist::WorkPtr FakeProcessGroup::start_barrier() { return log("barrier", Tensor()); }

}  // namespace sg::test
