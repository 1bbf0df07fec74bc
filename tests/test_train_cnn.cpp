// apps/train_cnn as a program: what it checks at start-up (flags, where it will write), a run
// whose loss stops being finite (stopped, its snapshot kept), and a snapshot whose metadata makes
// no sense; what --profile writes, on one process and on two; gradient accumulation's step count;
// --zero's snapshot, resumed without --zero and back.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <sstream>

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

TEST_CASE("train_cnn refuses --save-every-steps without --snapshot, whose FILE.steps folder it writes into") {
  test::TempDir dir;
  const Run run = train_cnn({"--save-every-steps", "10", "--data-dir", dir.path() + "/no-data"});
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, "--save-every-steps writes beside the --snapshot file: give --snapshot FILE too"));
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

TEST_CASE("train_cnn stops after --max-nonfinite-steps inf or NaN losses in a row and keeps the snapshot before") {
  if (!have_fashion_mnist()) return;
  // 10 steps of 64 images per epoch. Epoch 1 trains at SGD's lr 0.005 into the snapshot; its lr is
  // then set to 1e30, which blows the weights up in a step or two of epoch 2.
  test::TempDir dir;
  const std::string snapshot = dir.path() + "/snapshot.safetensors";
  const std::vector<std::string> run = {"--optimizer",   "sgd", "--train-subset", "640",
                                        "--test-subset", "100", "--snapshot",     snapshot};
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), run.begin(), run.end());
    return extra;
  };
  REQUIRE(train_cnn(with({"--epochs", "1"})).exit_code == 0);
  test::set_snapshot_lr(snapshot, 1e30);
  const std::string good = test::read_text(snapshot);
  Run diverged = train_cnn(with({"--epochs", "2", "--max-nonfinite-steps", "3"}));
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_cnn: the loss went non-finite ("));
  CHECK(test::contains(diverged.output, " and stayed so for 3 consecutive steps, to step 1"));
  CHECK(test::contains(diverged.output, "so training stopped (--max-nonfinite-steps 3; 0 never stops)"));
  CHECK(!test::contains(diverged.output, "epoch 2: test loss"));
  CHECK(test::read_text(snapshot) == good);
  // With 0 the run trains on to the end of epoch 2, but the snapshot is not replaced by NaN weights.
  diverged = train_cnn(with({"--epochs", "2", "--max-nonfinite-steps", "0"}));
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_cnn: not writing " + snapshot + " after step 20: the model's "));
  CHECK(test::contains(diverged.output, " holds inf or NaN (the loss first went non-finite at step 1"));
  CHECK(test::read_text(snapshot) == good);
}

TEST_CASE("train_cnn --gradient-accumulation-steps 2 anneals --scheduler cosine over the optimizer steps") {
  if (!have_fashion_mnist()) return;
  // 640 images in micro-batches of 32: 20 micro-batches, 10 optimizer steps, over which the cosine
  // schedule goes from lr 0.005 to 0. Counted in micro-batches it would stop half-way, at 0.0025.
  test::TempDir dir;
  const Run run =
      train_cnn({"--train-subset", "640", "--test-subset", "100", "--batch-size", "32", "--gradient-accumulation-steps",
                 "2", "--scheduler", "cosine", "--epochs", "1", "--log", dir.path() + "/log.csv"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, "32 images per process and micro-batch, 2 micro-batches per step"));
  CHECK(test::contains(run.output, " 10/10 "));
  std::istringstream lines(test::read_text(dir.path() + "/log.csv"));
  std::string line, last_step_row;
  std::getline(lines, line);  // step,epoch,loss,lr,accuracy
  int step_rows = 0;
  while (std::getline(lines, line))
    if (line.ends_with(",")) {  // a step's row: no accuracy
      ++step_rows;
      last_step_row = line;
    }
  CHECK(step_rows == 10);
  CHECK(last_step_row.starts_with("10,1,"));
  const size_t lr_at = last_step_row.rfind(',', last_step_row.size() - 2) + 1;
  CHECK(std::stod(last_step_row.substr(lr_at)) < 1e-9);
}

TEST_CASE("train_cnn --amp-debug names the parameters of the skipped f16 steps and ends with the summary") {
  test::TempDir dir;
  const Run refused = train_cnn({"--amp", "bf16", "--amp-debug", "--data-dir", dir.path()});
  INFO(refused.output);
  CHECK(refused.exit_code == 1);
  CHECK(
      test::contains(refused.output, "--amp-debug reports on the f16 loss scaler: it needs --amp f16, got --amp bf16"));
  if (!have_fashion_mnist()) return;
  // The initial scale 65536 is too large for the CNN's gradients: some of the first steps are skipped.
  const Run run = train_cnn({"--amp", "f16", "--amp-debug", "--epochs", "1", "--train-subset", "640", "--test-subset",
                             "100", "--tensorboard", dir.path() + "/tb"});
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(test::contains(run.output, "amp: rank 0 skipped iteration "));
  CHECK(test::contains(run.output, "inf/NaN in this rank's own gradients (not averaged by DDP): 11.weight ("));
  CHECK(test::contains(run.output, "amp diagnostics: 10 iterations, "));
  // Those skips are the scale backing off from its start, within the settling iterations: no layer is picked.
  CHECK(test::contains(run.output,
                       "(inf/NaN gradients in >= 2 skipped steps from iteration 100 on, or a mean f16 "
                       "underflow fraction >= 10.0%): none"));
  // Each parameter's underflow fraction is a TensorBoard curve (the tag is plain text in the event file);
  // the CNN is a Sequential, whose last layer, a Linear, is child 11.
  REQUIRE(fs::is_directory(dir.path() + "/tb"));
  for (const fs::directory_entry& events : fs::directory_iterator(dir.path() + "/tb"))
    CHECK(test::contains(test::read_text(events.path().string()), "amp/underflow/11.weight"));
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

namespace {

// The span events of a Chrome trace by name, and the names of its thread rows by tid.
struct Trace {
  std::multimap<std::string, nlohmann::json> spans;
  std::map<int, std::string> threads;
};

Trace read_trace(const std::string& path) {
  Trace trace;
  const nlohmann::json json = nlohmann::json::parse(test::read_text(path));
  for (const nlohmann::json& event : json.at("traceEvents")) {
    if (event.at("ph") == "X") trace.spans.emplace(event.at("name").get<std::string>(), event);
    else if (event.at("name") == "thread_name")
      trace.threads[event.at("tid").get<int>()] = event.at("args").at("name").get<std::string>();
  }
  return trace;
}

}  // namespace

TEST_CASE("train_cnn --profile writes the trace and the key_averages table of steps 2 to 6") {
  if (!have_fashion_mnist()) return;
  test::TempDir dir;
  const Run run = train_cnn(
      {"--train-subset", "640", "--test-subset", "100", "--epochs", "1", "--profile", dir.path() + "/profile"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const Trace trace = read_trace(dir.path() + "/profile/trace.json");
  // Five steps: one optimizer step, one backward and two convolutions forward in each.
  CHECK(trace.spans.count("Adam.step") == 5);
  CHECK(trace.spans.count("backward") == 5);
  CHECK(trace.spans.count("conv2d") == 10);
  CHECK(trace.spans.count("ConvolutionBackward") == 10);
  CHECK(trace.spans.count("DataLoader.next") == 5);
  const nlohmann::json& conv = trace.spans.find("conv2d")->second;
  CHECK(conv.at("args").at("input shapes").at(0).at(0) == 64);  // the batch
  CHECK(test::contains(test::read_text(dir.path() + "/profile/timeline.svg"), ">gemm</text>"));
  const std::string table = test::read_text(dir.path() + "/profile/key_averages.txt");
  CHECK(test::contains(table, "conv2d"));
  CHECK(test::contains(table, "Profiled wall time"));
}

TEST_CASE("train_cnn --profile on 2 processes writes one trace per rank, its all-reduces on the communication row") {
  if (!have_fashion_mnist()) return;
  test::TempDir dir;
  const Run run = test::run_app(
      SG_TRAIN_CNN, {"--train-subset", "1280", "--test-subset", "100", "--epochs", "1", "--profile", dir.path()}, 2);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(!fs::exists(dir.path() + "/trace.json"));
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank ", rank);
    const std::string path = dir.path() + "/trace_rank" + std::to_string(rank) + ".json";
    const nlohmann::json json = nlohmann::json::parse(test::read_text(path));
    CHECK(json.at("traceEvents").at(0).at("pid") == rank);
    const Trace trace = read_trace(path);
    REQUIRE(trace.spans.count("all_reduce") >= 5);  // DDP's buckets, at least one per step
    const nlohmann::json& all_reduce = trace.spans.find("all_reduce")->second;
    CHECK(all_reduce.at("cat") == "collective");
    CHECK(all_reduce.at("args").at("bytes").get<int64_t>() > 0);
    CHECK(trace.threads.at(all_reduce.at("tid").get<int>()) == "communication (rank " + std::to_string(rank) + ")");
    CHECK(fs::exists(dir.path() + "/key_averages_rank" + std::to_string(rank) + ".txt"));
    CHECK(test::contains(test::read_text(dir.path() + "/timeline_rank" + std::to_string(rank) + ".svg"),
                         ">collective</text>"));  // the all-reduces are in the picture's legend
  }
}

TEST_CASE("train_cnn --zero shards Adam's state over 2 processes, and its snapshot resumes without --zero and back") {
  if (!have_fashion_mnist()) return;
  test::TempDir dir;
  const std::string snapshot = dir.path() + "/snapshot.safetensors";
  const auto run = [&](int epochs, bool zero, int processes) {
    std::vector<std::string> args = {"--train-subset",       "640",        "--test-subset", "100", "--epochs",
                                     std::to_string(epochs), "--snapshot", snapshot};
    if (zero) args.push_back("--zero");
    return test::run_app(SG_TRAIN_CNN, args, processes);
  };
  const Run sharded = run(1, true, 2);
  INFO(sharded.output);
  REQUIRE(sharded.exit_code == 0);
  CHECK(test::contains(sharded.output, "ZeRO-1 over 2 processes: optimizer state per rank "));
  const Run plain = run(2, false, 1);  // the snapshot holds the whole state: a plain Adam loads it
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK(test::contains(plain.output, "after epoch 1"));
  CHECK(!test::contains(plain.output, "ZeRO-1"));
  const Run sharded_again = run(3, true, 2);  // and each rank of a --zero run keeps its shard of it
  INFO(sharded_again.output);
  CHECK(sharded_again.exit_code == 0);
  CHECK(test::contains(sharded_again.output, "after epoch 2"));
}

TEST_CASE("train_cnn --zero-shard-gradients on 2 processes logs the losses of --zero alone, bit for bit") {
  if (!have_fashion_mnist()) return;
  test::TempDir dir;
  const auto run = [&](const std::string& name, std::vector<std::string> flags) {
    std::vector<std::string> args = {"--train-subset", "640", "--test-subset", "100",
                                     "--epochs",       "1",   "--log",         dir.path() + "/" + name + ".csv"};
    args.insert(args.end(), flags.begin(), flags.end());
    return test::run_app(SG_TRAIN_CNN, args, 2);
  };
  REQUIRE(run("zero1", {"--zero"}).exit_code == 0);
  const Run sharded = run("zero2", {"--zero", "--zero-shard-gradients"});
  INFO(sharded.output);
  REQUIRE(sharded.exit_code == 0);
  CHECK(test::contains(sharded.output, "ZeRO-2 (gradients reduce-scattered) over 2 processes"));
  // Each owned average is the same sum of two ranks' values (a + b, in either order), divided
  // alike; train_cnn does not clip. So the log is the same to the last digit.
  CHECK(test::read_text(dir.path() + "/zero2.csv") == test::read_text(dir.path() + "/zero1.csv"));
}
