// One rank of the multi-process Trainer tests (tests/test_trainer.cpp starts one process per rank
// with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set). Usage:
//   dist_worker_trainer <scenario> <output dir> [scenario arguments]
// Each rank checks what it can itself (an sg::Error ends it with exit code 3: tests/worker_main.h);
// rank 0 writes the final parameters into <output dir>.
#include <iostream>
#include <string>

#include "trainer_scenarios.h"
#include "worker_main.h"

using namespace sg;
using namespace sg::test::trainer;

namespace {

std::string rank_name() { return "rank " + std::to_string(dist::get_rank()); }

void save_parameters(dist::Trainer& trainer, const std::string& path) {
  if (trainer.accelerator().is_main_process()) save_safetensors(path, trainer.model().state_dict());
}

// The reference run: `per_device` examples per rank and micro-batch, `accumulation` micro-batches
// per step; rank 0 saves the parameters to <out>/<tag>.safetensors.
void train(const std::string& out, const std::string& tag, int64_t per_device, int accumulation) {
  dist::Trainer trainer(tiny_model(), reference_arguments(out + "/" + tag, per_device, accumulation),
                        classification_data(kExamples));
  const dist::TrainOutput result = trainer.train();
  SG_CHECK(result.global_step == kSteps, rank_name(), ": ", result.global_step, " optimizer steps");
  save_parameters(trainer, out + "/" + tag + ".safetensors");
}

// Mid-epoch resume (resume_scenario): rank 0 saves the final parameters to
// <out>/<mode>.safetensors.
void resume(const std::string& out, const std::string& mode, int64_t stop_at) {
  const ScenarioRun run = resume_scenario(out, mode, stop_at);
  if (dist::get_rank() == 0) save_safetensors(out + "/" + mode + ".safetensors", run.parameters);
}

// evaluate() on an eval set of `size` examples: compute_metrics must see each exactly once, in
// order, and eval_loss must be the mean over exactly those examples.
void metrics(const std::string& out, int64_t size) {
  auto eval_set = classification_data(size, 9);
  dist::TrainingArguments args = reference_arguments(out + "/metrics", 4, 1);
  args.per_device_eval_batch_size = 2;  // the padded duplicate lands in the last batch
  auto model = tiny_model();
  const Tensor outputs = (*model)(eval_set->inputs()).detach();
  const double expected_loss = nn::functional::cross_entropy(outputs, eval_set->targets()).item();
  int calls = 0;
  const auto check = [&](const dist::EvalPrediction& prediction) {
    ++calls;
    SG_CHECK(prediction.predictions.size(0) == size && prediction.label_ids.size(0) == size, rank_name(),
             ": compute_metrics saw ", prediction.predictions.size(0), " predictions and ",
             prediction.label_ids.size(0), " labels, expected ", size);
    SG_CHECK((prediction.label_ids - eval_set->targets()).abs().max().item() == 0, rank_name(),
             ": the labels are not the eval set's, in order");
    SG_CHECK((prediction.predictions - outputs).abs().max().item() < 1e-5, rank_name(),
             ": the predictions are not the model's outputs on the eval set, in order");
    return dist::Metrics{{"examples", static_cast<double>(size)}};
  };
  dist::Trainer trainer(model, args, classification_data(kExamples), eval_set, {.compute_metrics = check});
  const dist::Metrics result = trainer.evaluate();
  SG_CHECK(calls == 1 && result.at("eval_examples") == static_cast<double>(size), rank_name(), ": eval_examples");
  SG_CHECK(std::abs(result.at("eval_loss") - expected_loss) < 1e-5, rank_name(), ": eval_loss ", result.at("eval_loss"),
           ", expected ", expected_loss);
  std::cout << rank_name() << ": metrics ok\n";
}

void run(const std::string& scenario, const std::string& out, const test::WorkerArgument& arg) {
  if (scenario == "train") train(out, arg(3), std::stoll(arg(4)), std::stoi(arg(5)));
  else if (scenario == "resume") resume(out, arg(3), std::stoll(arg(4)));
  else if (scenario == "samples")
    samples_scenario(out, arg(3), std::stoll(arg(4)), std::stoll(arg(5)), arg(6) == "resume");
  else if (scenario == "metrics") metrics(out, std::stoll(arg(3)));
  else SG_FAIL("unknown scenario '", scenario, "'");
}

}  // namespace

int main(int argc, char** argv) { return test::run_worker(argc, argv, run); }
