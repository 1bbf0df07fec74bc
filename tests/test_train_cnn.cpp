// apps/train_cnn as a program: what it checks at start-up (flags, where it will write), a run
// whose loss stops being finite, and a snapshot whose metadata makes no sense.
#include <filesystem>

#include "dist_harness.h"
#include "helpers.h"
#include "models/cnn.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

using Run = test::AppRun;

// train_cnn with `args` as a single process.
Run train_cnn(const std::vector<std::string>& args) { return test::run_app(SG_TRAIN_CNN, args, 1); }

// The runs below that train need the data set; the ones that stop at start-up do not.
bool have_fashion_mnist() {
  if (fs::is_directory(data::FashionMNIST::kDefaultRoot)) return true;
  MESSAGE("skipped: ", data::FashionMNIST::kDefaultRoot,
          " is absent (install the Debian package dataset-fashion-mnist)");
  return false;
}

}  // namespace

TEST_CASE("train_cnn refuses a --save path in a missing directory at start-up, before reading any data") {
  test::TempDir dir;
  const std::string save = dir.path() + "/no/such/dir/ckpt.safetensors";
  const Run run = train_cnn({"--save", save, "--data-dir", dir.path() + "/no-data"});
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output,
                       "train_cnn: --save " + save + ": the directory " + dir.path() + "/no/such/dir does not exist"));
  CHECK(!test::contains(run.output, "FashionMNIST"));
}

TEST_CASE("train_cnn refuses a --threads count outside 1 to 1024, naming the flag") {
  test::TempDir dir;
  for (const char* threads : {"0", "1025", "100000"}) {
    const Run run = train_cnn({"--threads", threads, "--data-dir", dir.path()});  // no data: never trains
    INFO(run.output);
    CHECK(run.exit_code != 0);
    CHECK(test::contains(run.output, "--threads"));
    CHECK(test::contains(run.output, "1024"));
  }
}

TEST_CASE("train_cnn stops with an error after --max-nonfinite-steps consecutive inf or NaN losses") {
  if (!have_fashion_mnist()) return;
  // An lr of 1e30 blows the weights up in a step or two; from then on the loss is inf or NaN.
  const Run run = train_cnn(
      {"--optimizer", "sgd", "--lr", "1e30", "--train-subset", "640", "--epochs", "1", "--max-nonfinite-steps", "3"});
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, " for 3 consecutive steps (epoch 1, step "));
  CHECK(test::contains(run.output, "so training stopped (--max-nonfinite-steps 3; 0 never stops)"));
  CHECK(!test::contains(run.output, "epoch 1: test loss"));
}

TEST_CASE("train_cnn refuses a snapshot whose epoch is missing, negative or not a whole number, naming file and key") {
  if (!have_fashion_mnist()) return;
  // A snapshot of what train_cnn's defaults build (the CNN, Adam at lr 0.005, no scheduler).
  test::TempDir dir;
  const std::string snapshot = dir.path() + "/snapshot.safetensors";
  {
    dist::Accelerator accelerator;
    auto model = models::make_fashion_mnist_model("cnn");
    optim::Adam optimizer(model->parameters(), {.lr = 0.005});
    accelerator.prepare(optimizer);
    accelerator.save_state(snapshot, *model, {{"epoch", "1"}, {"step", "10"}, {"model", "cnn"}});
  }
  const SafetensorsFile good = load_safetensors(snapshot);
  const auto resume_with_epoch = [&](const std::optional<std::string>& epoch) {
    optim::Metadata metadata = good.metadata;
    if (epoch) metadata["epoch"] = *epoch;
    else metadata.erase("epoch");
    save_safetensors(snapshot, good.tensors, metadata);
    return train_cnn({"--snapshot", snapshot, "--train-subset", "64", "--epochs", "1"});
  };
  const std::string where = "train_cnn: checkpoint " + snapshot + ": ";
  for (const auto& [epoch, problem] : std::vector<std::pair<std::optional<std::string>, std::string>>{
           {"1abc", "metadata 'epoch' is \"1abc\", not a whole number"},
           {"-5", "metadata 'epoch' is -5, outside [0, 1]"},
           {"2", "metadata 'epoch' is 2, outside [0, 1]"},  // a longer run's snapshot, resumed with --epochs 1
           {std::nullopt, "no metadata entry 'epoch'"}}) {
    const Run run = resume_with_epoch(epoch);
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(test::contains(run.output, where + problem));
  }
}
