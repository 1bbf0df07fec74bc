// A small DDP training loop profiled with --profile's machinery, for tests/test_step_report.cpp.
// Usage (as every rank): step_report_probe DIR SLOW_RANK — rank SLOW_RANK's dataset sleeps 5 ms
// per example (40 ms per batch of 8), a loader that cannot keep up; -1 slows no rank.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "dist/step_report.h"
#include "log/step_profiler.h"
#include "syncgrad.h"

using namespace sg;

namespace {

class SlowDataset : public data::Dataset {
public:
  SlowDataset(std::shared_ptr<data::TensorDataset> inner, bool slow) : inner_(std::move(inner)), slow_(slow) {}
  int64_t size() const override { return inner_->size(); }
  data::Example get(int64_t index) const override {
    if (slow_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return inner_->get(index);
  }

private:
  std::shared_ptr<data::TensorDataset> inner_;
  bool slow_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "";
  const int slow_rank = argc > 2 ? std::atoi(argv[2]) : -1;
  dist::Accelerator accelerator;
  manual_seed(1);
  Generator data(7);
  auto examples =
      std::make_shared<data::TensorDataset>(randn({256, 6}, {}, &data), randint(0, 3, {256}, {DType::i64}, &data));
  auto dataset = std::make_shared<SlowDataset>(examples, accelerator.process_index() == slow_rank);
  auto model = accelerator.prepare(std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 3)}));
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  accelerator.prepare(optimizer);
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 8});
  profiler::StepProfiler profiler(dir, accelerator.process_index(), accelerator.num_processes(), 1, 5);
  dist::report_steps_across_ranks(profiler, dir);
  for (const data::Batch& batch : loader) {
    accelerator.backward(nn::functional::cross_entropy((*model)(batch.input), batch.target));
    accelerator.step(optimizer);
    accelerator.zero_grad(optimizer);
    profiler.step();
  }
  return 0;
}
