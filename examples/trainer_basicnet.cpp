// BasicNet on Fashion-MNIST with dist::Trainer (docs/trainer.md): one process, or data-parallel with
// `build/apps/sgrun --nproc-per-node 2 build/examples/trainer_basicnet`, the program unchanged.
#include "syncgrad.h"

using namespace sg;

namespace {

// BasicNet ends in log_softmax, so its loss is NLL rather than the default cross-entropy.
Tensor nll(const Tensor& log_probabilities, const Tensor& labels) {
  return nn::functional::nll_loss(log_probabilities, labels);
}

dist::Metrics accuracy(const dist::EvalPrediction& eval) {
  return {{"accuracy", eq(argmax(eval.predictions, 1), eval.label_ids).to(DType::f32).mean().item()}};
}

}  // namespace

int main() {
  const data::Transform normalize = data::Normalize({data::FashionMNIST::kMean}, {data::FashionMNIST::kStd});
  auto train_set = std::make_shared<data::FashionMNIST>(data::FashionMNIST::kDefaultRoot, true, normalize);
  auto test_set = std::make_shared<data::FashionMNIST>(data::FashionMNIST::kDefaultRoot, false, normalize);
  const dist::TrainingArguments args{.output_dir = "trainer_basicnet_out",
                                     .per_device_train_batch_size = 64,
                                     .per_device_eval_batch_size = 1000,
                                     .num_train_epochs = 1,
                                     .learning_rate = 1e-3,
                                     .logging_steps = 100,
                                     .save_strategy = "epoch"};
  dist::Trainer trainer(std::make_shared<models::BasicNet>(), args, train_set, test_set,
                        {.compute_loss_func = nll, .compute_metrics = accuracy});
  const dist::TrainOutput result = trainer.train();
  const dist::Metrics metrics = trainer.evaluate();
  trainer.accelerator().print("test accuracy ", 100 * metrics.at("eval_accuracy"), "% after ", result.global_step,
                              " steps, training ", result.metrics.at("train_runtime"), " s on ",
                              trainer.accelerator().num_processes(), " process(es)");
}
