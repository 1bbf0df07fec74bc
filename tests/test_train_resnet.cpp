// apps/train_resnet as a program, on a tiny image folder the tests write (3 classes of 6 random
// 32 x 32 images; --val-fraction 0.2 keeps 1 per class for validation): the recipe's cosine
// LambdaLR over the epochs, a run on 2 processes under sgrun with SyncBatchNorm that counts each
// validation image once, a worker killed under sgrun --max-restarts 1 that resumes from the
// snapshot and ends where an unkilled run ends, pretrained weights with the head dropped and
// everything but fc frozen, its own checkpoints taken back as weights and other models' refused,
// a diverging run stopped with its snapshot kept, --checkpoint-activations against a plain run and
// --gradient-accumulation-steps counting optimizer steps. Every run trains resnet18, which is quick at
// 32 x 32.
#include <cmath>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "data/image_folder.h"
#include "dist_harness.h"
#include "helpers.h"
#include "models/cnn.h"
#include "models/resnet.h"
#include "optim/checkpoint.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

using Run = test::AppRun;

constexpr int64_t kClasses = 3, kPerClass = 6;

// dir/images/class_<k>/<i>.png: random pixels, so the runs exercise the pipeline, not learning.
std::string write_folder(const std::string& dir) {
  const std::string root = dir + "/images";
  const Tensor images = randint(0, 256, {kClasses * kPerClass, 3, 32, 32}, {DType::u8, Device::cpu()}, &test::rng());
  std::vector<int64_t> labels(kClasses * kPerClass);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i) % kClasses;
  data::write_image_folder(root, images, tensor(labels), {"class_0", "class_1", "class_2"}, kClasses * kPerClass,
                           data::ImageFormat::png, 1);
  return root;
}

// The flags every run shares: resnet18 on write_folder's images at 32 x 32, 4 images per step
// (15 training images: 4 steps on 1 process, 2 on 2, never a batch of one for BatchNorm).
std::vector<std::string> small_run(const std::string& root, int epochs) {
  return {"--data-path",  root,   "--num-classes", "3",  "--model",  "resnet18",
          "--image-size", "32",   "--batch-size",  "4",  "--epochs", std::to_string(epochs),
          "--lr",         "0.01", "--lrf",         "0.1"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Run train_resnet(const std::vector<std::string>& args, int processes = 1) {
  return test::run_app(SG_TRAIN_RESNET, args, processes);
}

// The lr printed in each "epoch k/E: ..., lr X (...)" line, in order.
std::vector<double> epoch_lrs(const std::string& output) {
  std::istringstream lines(output);
  std::vector<double> lrs;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("), lr ");
    if (line.starts_with("epoch ") && test::contains(line, "val accuracy") && at != std::string::npos)
      lrs.push_back(std::stod(line.substr(at + 6)));
  }
  return lrs;
}

// Max |a - b| over the tensors of two files whose names start with `prefix`.
double difference(const SafetensorsFile& a, const SafetensorsFile& b, const std::string& prefix) {
  double worst = 0;
  for (const auto& [name, tensor] : a.tensors)
    if (name.starts_with(prefix)) worst = std::max(worst, test::max_abs_diff(tensor, b.tensors.at(name)));
  return worst;
}

}  // namespace

TEST_CASE("train_resnet names a folder whose class count is not --num-classes, and a missing --snapshot directory") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  Run run = train_resnet({"--data-path", root, "--num-classes", "5", "--model", "resnet18"});
  CHECK(run.exit_code == 1);
  CHECK(
      test::contains(run.output, "train_resnet: --data-path " + root + " has 3 class folders but --num-classes is 5"));
  const std::string snapshot = dir.path() + "/no/such/dir/s.safetensors";
  run = train_resnet({"--data-path", root, "--num-classes", "3", "--snapshot", snapshot});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, "train_resnet: --snapshot " + snapshot + ": the directory " + dir.path() +
                                       "/no/such/dir does not exist (create it first)"));
  CHECK(!test::contains(run.output, "images were found"));  // before reading the folder
}

TEST_CASE("train_resnet follows the recipe's cosine LambdaLR per epoch and reports the validation accuracy") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  const Run run = train_resnet(small_run(root, 3) + std::vector<std::string>{"--save-dir", dir.path() + "/weights"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, "15 training / 3 validation images at 32x32, 1 process(es)"));
  CHECK(test::contains(run.output, "epoch 3/3: train loss "));
  CHECK(test::contains(run.output, "img/s"));
  // lr * (((1 + cos(pi e / 3)) / 2) * (1 - lrf) + lrf) for e = 0, 1, 2, printed with 6 digits.
  const std::vector<double> lrs = epoch_lrs(run.output);
  REQUIRE(lrs.size() == 3);
  for (int epoch = 0; epoch < 3; ++epoch)
    CHECK(lrs[static_cast<size_t>(epoch)] ==
          doctest::Approx(0.01 * ((1 + std::cos(epoch * M_PI / 3)) / 2 * 0.9 + 0.1)).epsilon(1e-5));
  CHECK(lrs[1] == doctest::Approx(0.00775).epsilon(1e-6));  // the formula by hand: 0.01 * (0.75 * 0.9 + 0.1)
  for (const char* file : {"model-0.safetensors", "model-2.safetensors", "class_indices.json"})
    CHECK(fs::exists(dir.path() + "/weights/" + file));
  CHECK(test::contains(test::read_text(dir.path() + "/weights/class_indices.json"), R"("2": "class_2")"));
}

TEST_CASE("train_resnet --checkpoint-activations trains to the plain run's weights and BatchNorm statistics") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  REQUIRE(train_resnet(small_run(root, 1) + std::vector<std::string>{"--save-dir", dir.path() + "/plain"}).exit_code ==
          0);
  const Run run = train_resnet(small_run(root, 1) + std::vector<std::string>{"--checkpoint-activations", "--save-dir",
                                                                             dir.path() + "/checkpointed"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, ", activation checkpointing (each block recomputed in backward)"));
  // Every tensor of the state_dict, running_mean, running_var and num_batches_tracked included: the
  // recomputed blocks normalise as the forward did and move the statistics once (Note [BatchNorm
  // under activation checkpointing]).
  const SafetensorsFile plain = load_safetensors(dir.path() + "/plain/model-0.safetensors");
  const SafetensorsFile checkpointed = load_safetensors(dir.path() + "/checkpointed/model-0.safetensors");
  CHECK(plain.tensors.size() == checkpointed.tensors.size());
  CHECK(difference(plain, checkpointed, "") == 0);
}

TEST_CASE("train_resnet --gradient-accumulation-steps 2 steps the optimizer once per 2 micro-batches") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  const std::vector<std::string> accumulate = {"--gradient-accumulation-steps", "2", "--snapshot",
                                               dir.path() + "/snapshot.safetensors"};
  const Run first = train_resnet(small_run(root, 1) + accumulate);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(test::contains(first.output, "4 images per process and micro-batch, 2 micro-batches per step"));
  CHECK(test::contains(first.output, " 2/2 "));  // 15 images: 4 micro-batches, 2 optimizer steps
  const Run resumed = train_resnet(small_run(root, 2) + accumulate);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(test::contains(resumed.output, "after epoch 1 (step 2)"));
}

TEST_CASE("train_resnet under sgrun on 2 processes with --sync-bn counts every validation image once") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", SG_TRAIN_RESNET};
  args = args + small_run(root, 1) + std::vector<std::string>{"--sync-bn", "--scale-lr"};
  const test::RankResults sgrun = test::run_ranks(SG_SGRUN, 1, args, {}, 120);
  INFO(sgrun.summary());
  REQUIRE(sgrun.exit_code(0) == 0);
  const std::string& output = sgrun.output(0);
  CHECK(test::contains(output, "2 process(es)"));
  CHECK(test::contains(output, "lr 0.02"));  // --scale-lr: 0.01 x 2 processes
  // 3 validation images over 2 ranks: the sampler pads to 4, the count is out of 3.
  CHECK(test::contains(output, "/3), lr 0.02"));
  CHECK(test::contains(output, "val accuracy "));
}

TEST_CASE(
    "train_resnet under sgrun --max-restarts 1: a killed worker resumes from its newest snapshot, ends as unkilled") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  const std::vector<std::string> plain =
      small_run(root, 2) + std::vector<std::string>{"--snapshot", dir.path() + "/plain.safetensors"};
  REQUIRE(train_resnet(plain, 2).exit_code == 0);
  // 2 steps per epoch on 2 processes: rank 1 dies after step 3, the first of epoch 2. The restart
  // resumes from the snapshot of epoch 1, or with --save-every-steps 1 from that of step 3
  // (checkpoint_2: steps 1, 2, 3 are checkpoint_0, 1, 2), in the middle of epoch 2.
  const struct {
    std::string name;
    std::vector<std::string> flags;
    std::string resumed;
  } cases[] = {{"killed", {}, "killed.safetensors after epoch 1 (step 2)"},
               {"stepped",
                {"--save-every-steps", "1"},
                "stepped.safetensors.steps/checkpoints/checkpoint_2/state.safetensors after epoch 1 (step 3)"}};
  for (const auto& run : cases) {
    CAPTURE(run.name);
    const std::string snapshot = dir.path() + "/" + run.name + ".safetensors";
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", SG_TRAIN_RESNET};
    args = args + small_run(root, 2) + std::vector<std::string>{"--snapshot", snapshot} + run.flags;
    const test::RankResults sgrun = test::run_ranks(SG_SGRUN, 1, args, {{"SG_TEST_KILL_AT_STEP", "3"}}, 120);
    INFO(sgrun.summary());
    CHECK(sgrun.exit_code(0) == 0);
    CHECK(test::contains(sgrun.output(0), "restarting (attempt 1 of 1)"));
    CHECK(test::contains(sgrun.output(0), "resumed from " + dir.path() + "/" + run.resumed));
    // Same seed, data order, augmentation draws and thread count: equal to the bit, weights,
    // BatchNorm statistics and momentum alike.
    const SafetensorsFile a = load_safetensors(dir.path() + "/plain.safetensors");
    const SafetensorsFile b = load_safetensors(snapshot);
    CHECK(difference(a, b, "model.") == 0);
    CHECK(difference(a, b, "optimizer.") == 0);
  }
  // Killed after step 4, the last of epoch 2, just after its step snapshot: the restart resumes at
  // the end of epoch 2, where no batch is left to run, and says so instead of printing a loss.
  {
    const std::string snapshot = dir.path() + "/at_end.safetensors";
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", SG_TRAIN_RESNET};
    args = args + small_run(root, 2) + std::vector<std::string>{"--snapshot", snapshot, "--save-every-steps", "1"};
    const test::RankResults sgrun = test::run_ranks(SG_SGRUN, 1, args, {{"SG_TEST_KILL_AT_STEP", "4"}}, 120);
    INFO(sgrun.summary());
    CHECK(sgrun.exit_code(0) == 0);
    CHECK(test::contains(sgrun.output(0), "restarting (attempt 1 of 1)"));
    CHECK(test::contains(sgrun.output(0), "epoch 2/2: train loss - (no batch was left to run)"));
    const SafetensorsFile a = load_safetensors(dir.path() + "/plain.safetensors");
    CHECK(difference(a, load_safetensors(snapshot), "model.") == 0);
  }
  // --keep 2 (the default): the step snapshots of steps 3 and 4 remain.
  const std::string steps = dir.path() + "/stepped.safetensors.steps/checkpoints/";
  CHECK(std::filesystem::exists(steps + "checkpoint_3"));
  CHECK_FALSE(std::filesystem::exists(steps + "checkpoint_1"));
}

TEST_CASE("train_resnet --weights drops the 1000-class head and --freeze-layers trains fc alone") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  const std::string weights = dir.path() + "/imagenet.safetensors";
  Generator init(7);
  save_safetensors(weights, models::resnet18({.num_classes = 1000, .generator = &init})->state_dict());
  const std::vector<std::string> flags = {"--weights",
                                          weights,
                                          "--freeze-layers",
                                          "--save-dir",
                                          dir.path() + "/w",
                                          "--snapshot",
                                          dir.path() + "/snapshot.safetensors"};
  const Run run = train_resnet(small_run(root, 2) + flags);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, "fc.bias (file [1000], model [3]), fc.weight (file [1000, 512], model [3, 512])"));
  CHECK(test::contains(run.output, "(1539 trained)"));  // fc: 3 x 512 + 3
  const SafetensorsFile file = load_safetensors(weights);
  const SafetensorsFile first = load_safetensors(dir.path() + "/w/model-0.safetensors");
  const SafetensorsFile second = load_safetensors(dir.path() + "/w/model-1.safetensors");
  auto model = models::resnet18({.num_classes = 3});
  for (const auto& [name, param] : model->named_parameters()) {
    CAPTURE(name);
    if (name.starts_with("fc.")) {
      CHECK(test::max_abs_diff(first.tensors.at("model." + name), second.tensors.at("model." + name)) > 0);
    } else {  // frozen: the file's values, to the bit, after both epochs
      CHECK(test::max_abs_diff(file.tensors.at(name), second.tensors.at("model." + name)) == 0);
    }
  }
  // Only the two fc tensors reached SGD, so only they have momentum buffers.
  int64_t momentum_buffers = 0;
  for (const auto& [name, tensor] : load_safetensors(dir.path() + "/snapshot.safetensors").tensors)
    momentum_buffers += name.starts_with("optimizer.") && test::contains(name, "momentum_buffer");
  CHECK(momentum_buffers == 2);
}

TEST_CASE("train_resnet --weights takes back a checkpoint it wrote, under its model. names") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  REQUIRE(train_resnet(small_run(root, 1) + std::vector<std::string>{"--save-dir", dir.path() + "/first"}).exit_code ==
          0);
  const std::string checkpoint = dir.path() + "/first/model-0.safetensors";
  for (const std::string& weights : {checkpoint, dir.path() + "/snapshot.safetensors"}) {
    if (weights != checkpoint)  // a --snapshot, with optimizer state besides the weights
      REQUIRE(train_resnet(small_run(root, 1) + std::vector<std::string>{"--snapshot", weights}).exit_code == 0);
    CAPTURE(weights);
    const Run run = train_resnet(small_run(root, 1) + std::vector<std::string>{"--weights", weights, "--freeze-layers",
                                                                               "--save-dir", dir.path() + "/second"});
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(test::contains(run.output, "--weights " + weights + ": loaded 122 of 122 tensors"));
    // Frozen, every parameter outside fc still holds the file's value.
    const SafetensorsFile file = load_safetensors(weights);
    const SafetensorsFile trained = load_safetensors(dir.path() + "/second/model-0.safetensors");
    for (const auto& [name, param] : models::resnet18({.num_classes = 3})->named_parameters())
      if (!name.starts_with("fc."))
        CHECK(test::max_abs_diff(file.tensors.at("model." + name), trained.tensors.at("model." + name)) == 0);
  }
}

TEST_CASE("train_resnet --weights refuses a file of another model, naming it and the tensors it loaded") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  // A train_cnn checkpoint (the Fashion-MNIST CNN under model. names) and resnet18 weights for --model resnet50.
  const std::string cnn = dir.path() + "/cnn.safetensors", resnet18 = dir.path() + "/resnet18.safetensors";
  optim::save_checkpoint(cnn, *models::make_fashion_mnist_model("cnn"));
  save_safetensors(resnet18, models::resnet18({.num_classes = 3})->state_dict());
  for (const auto& [weights, model, counts] :
       {std::tuple{cnn, "resnet18", "loaded 0 of 122 tensors"}, std::tuple{resnet18, "resnet50", "of 320 tensors"}}) {
    std::vector<std::string> args = small_run(root, 1) + std::vector<std::string>{"--weights", weights};
    args[5] = model;  // --model
    const Run run = train_resnet(args);
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(test::contains(run.output, "train_resnet: weights " + weights + ": loaded "));
    CHECK(test::contains(run.output, counts));
    CHECK(test::contains(run.output, "every tensor outside the head (fc.*) must come from the file"));
    CHECK(!test::contains(run.output, "epoch 1/1"));
  }
}

TEST_CASE("train_resnet stops after --max-nonfinite-steps inf or NaN losses in a row and keeps the snapshot before") {
  test::TempDir dir;
  const std::string root = write_folder(dir.path());
  const std::string snapshot = dir.path() + "/snapshot.safetensors";
  const std::vector<std::string> run = small_run(root, 1) + std::vector<std::string>{"--snapshot", snapshot};
  REQUIRE(train_resnet(run).exit_code == 0);  // epoch 1: steps 1 to 4
  test::set_snapshot_lr(snapshot, 1e30);      // epoch 2 diverges in a step or two
  const std::string good = test::read_text(snapshot);
  std::vector<std::string> resumed = small_run(root, 2) + std::vector<std::string>{"--snapshot", snapshot};
  Run diverged = train_resnet(resumed + std::vector<std::string>{"--max-nonfinite-steps", "2"});
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_resnet: the loss went non-finite ("));
  CHECK(test::contains(diverged.output, "so training stopped (--max-nonfinite-steps 2; 0 never stops)"));
  CHECK(test::read_text(snapshot) == good);
  diverged = train_resnet(resumed + std::vector<std::string>{"--max-nonfinite-steps", "0"});
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_resnet: not writing " + snapshot + " after step 8: the model's "));
  CHECK(test::read_text(snapshot) == good);
}
