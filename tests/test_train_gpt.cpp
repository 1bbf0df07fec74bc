// apps/train_gpt as a program: its configuration errors, a short training run, a resumed run that
// continues bit-identically, 2 processes against 1 on the combined batch, and a worker killed under
// sgrun --max-restarts 1, a four-letter text, a diverging run stopped with its snapshot kept, and
// gradient accumulation against one batch of the micro-batches together, --zero against plain DDP.
// Every run trains gpt-nano on a small text for speed.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dist_harness.h"
#include "helpers.h"

using namespace sg;

namespace {

using Run = test::AppRun;

// 216 characters: with block_size 16, 200 examples, of which train_split 0.8 trains on 160 = 10 batches of 16.
std::string write_text(const std::string& dir) {
  std::string text;
  const std::string line = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. ";
  while (text.size() < 216) text += line;
  text.resize(216);
  const std::string path = dir + "/text.txt";
  std::ofstream(path) << text;
  return path;
}

// The overrides every run shares: gpt-nano on write_text's file, no AMP, no workers, a CSV log.
std::vector<std::string> small_run(const std::string& dir, const std::string& name, int64_t batch_size, int epochs) {
  return {"data_config.path=" + write_text(dir),
          "data_config.block_size=16",
          "data_config.truncate=1.0",
          "data_config.train_split=0.8",
          "gpt_config.model_type=gpt-nano",
          "trainer_config.max_epochs=" + std::to_string(epochs),
          "trainer_config.batch_size=" + std::to_string(batch_size),
          "trainer_config.data_loader_workers=0",
          "trainer_config.use_amp=false",
          "trainer_config.save_every=1",
          "trainer_config.snapshot_path=" + dir + "/" + name + ".safetensors",
          "trainer_config.log_path=" + dir + "/" + name + ".csv",
          "trainer_config.sample_tokens=20"};
}

std::vector<std::string> without_dropout(std::vector<std::string> args) {
  for (const char* key : {"embd_pdrop", "resid_pdrop", "attn_pdrop"})
    args.push_back(std::string("gpt_config.") + key + "=0");
  return args;
}

Run train_gpt(const std::vector<std::string>& args, int processes = 1) {
  return test::run_app(SG_TRAIN_GPT, args, processes);
}

// Column `column` of the CSV log (step,epoch,loss,eval_loss,grad_norm,scale), its non-empty cells.
std::vector<double> csv_column(const std::string& csv, size_t column) {
  std::istringstream lines(test::read_text(csv));
  std::string line;
  std::vector<double> out;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() > column && !cells[column].empty()) out.push_back(std::stod(cells[column]));
  }
  return out;
}

// The eval_loss column of the CSV log, one value per epoch.
std::vector<double> eval_losses(const std::string& csv) { return csv_column(csv, 3); }

// The step column of the CSV log's last row.
int64_t last_step(const std::string& csv) {
  std::istringstream lines(test::read_text(csv));
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty()) last = line;
  return std::stoll(last.substr(0, last.find(',')));
}

// Max |a - b| over the model weights of two snapshots.
double weight_difference(const std::string& a, const std::string& b) {
  const SafetensorsFile first = load_safetensors(a), second = load_safetensors(b);
  double worst = 0;
  for (const auto& [name, tensor] : first.tensors)
    if (name.starts_with("model.")) worst = std::max(worst, test::max_abs_diff(tensor, second.tensors.at(name)));
  return worst;
}

}  // namespace

TEST_CASE("train_gpt names an unknown override key, a value of the wrong type and an unknown key in the file") {
  test::TempDir dir;
  Run run = train_gpt({"trainer_config.max_epoch=2"});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output,
                       "override 'trainer_config.max_epoch=2': unknown key trainer_config.max_epoch (known keys: "));
  run = train_gpt({"trainer_config.max_epochs=two"});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, "trainer_config.max_epochs must be an integer, got 'two'"));
  run = train_gpt({"trainer_config.use_amp=maybe"});
  CHECK(test::contains(run.output, "trainer_config.use_amp must be true or false, got 'maybe'"));
  run = train_gpt({"max_epochs=2"});
  CHECK(test::contains(run.output, "override 'max_epochs=2': expected section.key=value"));
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << "data_config:\n  path: fortunes\n  blocksize: 64\n";
  run = train_gpt({"--config", config});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, "config " + config +
                                       ": unknown key data_config.blocksize (known keys in data_config: path, "
                                       "block_size, train_split, truncate)"));
  std::ofstream(config) << "model_config:\n  n_layer: 2\n";
  run = train_gpt({"--config", config});
  CHECK(test::contains(run.output, "unknown section 'model_config'"));
}

TEST_CASE("train_gpt blames a bad value on the override that set it, naming the key, or on the file") {
  test::TempDir dir;
  Run run = train_gpt({"trainer_config.max_epochs=0"});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output,
                       "override 'trainer_config.max_epochs=0': trainer_config.max_epochs must be >= 1, "
                       "got 0"));
  run = train_gpt({"trainer_config.data_loader_workers=1000000"});
  CHECK(test::contains(run.output,
                       "override 'trainer_config.data_loader_workers=1000000': "
                       "trainer_config.data_loader_workers must be at most 1024 (threads), got 1000000"));
  run = train_gpt({"trainer_config.batch_size=1.5"});
  CHECK(test::contains(run.output,
                       "override 'trainer_config.batch_size=1.5': trainer_config.batch_size must be an "
                       "integer, got '1.5'"));
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << "trainer_config:\n  save_every: 0\n";
  run = train_gpt({"--config", config, "trainer_config.max_epochs=3"});
  CHECK(test::contains(run.output, "config " + config + ": trainer_config.save_every must be >= 1, got 0"));
}

TEST_CASE("a model_type on the command line replaces the file's sizes, and a mix with one size is refused") {
  // The file describes a 6-layer model of width 192. gpt-nano on the command line is gpt-nano (3
  // layers of width 48); with n_layer=2 beside it, the sizes would come from two models, and GPTConfig
  // refuses a partial set of sizes rather than build the file's 6.8M-parameter width with 2 layers.
  test::TempDir dir;
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << "gpt_config:\n  n_layer: 6\n  n_head: 6\n  n_embd: 192\n";
  std::vector<std::string> args = small_run(dir.path(), "m", 16, 1);
  args.insert(args.begin(), {"--config", config});
  Run run = train_gpt(args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const SafetensorsFile snapshot = load_safetensors(dir.path() + "/m.safetensors");
  CHECK(snapshot.tensors.at("model.emb_stem.tok_emb.weight").size(1) == 48);
  CHECK(snapshot.tensors.contains("model.blocks.2.ln1.weight"));
  CHECK_FALSE(snapshot.tensors.contains("model.blocks.3.ln1.weight"));
  args.push_back("gpt_config.n_layer=2");
  run = train_gpt(args);
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output,
                       "give all of n_layer, n_head and n_embd, or none (model_type 'gpt-nano' then "
                       "picks them); got 1 of them"));
}

TEST_CASE("train_gpt's start line says when save_every leaves the run without a snapshot") {
  test::TempDir dir;
  std::vector<std::string> args = small_run(dir.path(), "s", 16, 1);
  args.push_back("trainer_config.save_every=3");
  const Run run = train_gpt(args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, "no snapshot will be written (save_every 3, last epoch 1)"));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/s.safetensors"));
}

TEST_CASE("train_gpt names a data file that is missing, and refuses a snapshot directory that does not exist") {
  test::TempDir dir;
  Run run = train_gpt({"data_config.path=" + dir.path() + "/none.txt"});
  CHECK(run.exit_code == 1);
  CHECK(test::contains(run.output, dir.path() + "/none.txt does not exist or is not a file"));
  run = train_gpt({"trainer_config.snapshot_path=" + dir.path() + "/no/dir/s.safetensors"});
  CHECK(test::contains(run.output,
                       "trainer_config.snapshot_path " + dir.path() + "/no/dir/s.safetensors: the directory"));
}

TEST_CASE(
    "train_gpt trains gpt-nano, evaluates every epoch, saves a snapshot and prints a sample that --generate can "
    "continue") {
  test::TempDir dir;
  std::vector<std::string> args = small_run(dir.path(), "a", 16, 2);
  args.push_back("trainer_config.tensorboard_dir=" + dir.path() + "/tb");
  const Run run = train_gpt(args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  // One event file whose records carry the tags (tests/test_summary_writer.cpp reads such files
  // back with TensorBoard itself).
  std::vector<std::string> event_files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/tb"))
    event_files.push_back(entry.path().string());
  REQUIRE(event_files.size() == 1);
  CHECK(std::filesystem::path(event_files[0]).filename().string().starts_with("events.out.tfevents."));
  const std::string events = test::read_text(event_files[0]);
  for (const char* tag : {"loss/train", "grad_norm", "loss/eval"}) CHECK(test::contains(events, tag));
  CHECK(test::contains(run.output, "Data has 216 characters, "));
  CHECK(test::contains(run.output, "number of parameters: 0.09M"));  // the recipe's count for gpt-nano
  CHECK(test::contains(run.output, "Snapshot not found. Training model from scratch"));
  CHECK(test::contains(run.output, "Epoch 2 | eval loss "));
  CHECK(test::contains(run.output, "--- sample (20 tokens, top_k 10) ---"));
  CHECK(eval_losses(dir.path() + "/a.csv").size() == 2);
  const test::RankResults generated = test::run_ranks(
      SG_TRAIN_GPT, 1,
      {"--generate", "--snapshot", dir.path() + "/a.safetensors", "--prompt", "the ", "--max-new-tokens", "12"});
  INFO(generated.summary());
  CHECK(generated.exit_code(0) == 0);
  CHECK(test::contains(generated.output(0), "12 new tokens in "));
  const test::RankResults unknown =
      test::run_ranks(SG_TRAIN_GPT, 1, {"--generate", "--snapshot", dir.path() + "/a.safetensors", "--prompt", "THE"});
  CHECK(test::contains(unknown.output(0), "character U+54 ('T') at position 0 is not in the vocabulary"));
}

TEST_CASE("a run resumed from its snapshot continues bit-identically to an uninterrupted one") {
  test::TempDir dir;
  REQUIRE(train_gpt(small_run(dir.path(), "whole", 16, 2)).exit_code == 0);
  REQUIRE(train_gpt(small_run(dir.path(), "split", 16, 1)).exit_code == 0);
  const Run resumed = train_gpt(small_run(dir.path(), "split", 16, 2));  // finds split.safetensors after epoch 1
  INFO(resumed.output);
  CHECK(test::contains(resumed.output, "at Epoch 1"));
  CHECK(!test::contains(resumed.output, "epoch 1/2"));
  // Same seed, data order, dropout draws (the RNG is in the snapshot) and thread count: equal to the bit.
  CHECK(weight_difference(dir.path() + "/whole.safetensors", dir.path() + "/split.safetensors") == 0);
  CHECK(eval_losses(dir.path() + "/whole.csv").back() == eval_losses(dir.path() + "/split.csv").back());
}

TEST_CASE(
    "use_amp on the CPU trains in f32, as the recipe's CUDA autocast leaves CPU tensors alone, unless "
    "amp_dtype names a type") {
  test::TempDir dir;
  REQUIRE(train_gpt(small_run(dir.path(), "f32", 16, 1)).exit_code == 0);
  std::vector<std::string> use_amp = small_run(dir.path(), "amp", 16, 1);
  use_amp.push_back("trainer_config.use_amp=true");  // the later override wins
  const Run amp = train_gpt(use_amp);
  INFO(amp.output);
  REQUIRE(amp.exit_code == 0);
  CHECK(test::contains(amp.output, "use_amp: the CPU has no faster f16 or bf16 products, so this run trains in f32"));
  CHECK(!test::contains(amp.output, "autocast"));
  CHECK(weight_difference(dir.path() + "/f32.safetensors", dir.path() + "/amp.safetensors") == 0);

  std::vector<std::string> bf16 = small_run(dir.path(), "bf16", 16, 1);
  bf16.insert(bf16.end(), {"trainer_config.use_amp=true", "trainer_config.amp_dtype=bf16"});
  const Run emulated = train_gpt(bf16);
  INFO(emulated.output);
  REQUIRE(emulated.exit_code == 0);
  CHECK(test::contains(emulated.output, "mixed precision bf16 on the CPU is emulated"));
  CHECK(test::contains(emulated.output, ", autocast bf16"));
  CHECK(weight_difference(dir.path() + "/f32.safetensors", dir.path() + "/bf16.safetensors") > 0);
}

TEST_CASE("train_gpt with activation_checkpointing trains to the same weights, dropout draws included") {
  test::TempDir dir;
  REQUIRE(train_gpt(small_run(dir.path(), "plain", 16, 1)).exit_code == 0);
  std::vector<std::string> checkpointed = small_run(dir.path(), "checkpointed", 16, 1);
  checkpointed.push_back("trainer_config.activation_checkpointing=true");
  const Run run = train_gpt(checkpointed);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, ", activation checkpointing (each Block recomputed in backward)"));
  CHECK(weight_difference(dir.path() + "/plain.safetensors", dir.path() + "/checkpointed.safetensors") == 0);
}

TEST_CASE("train_gpt on 2 processes equals 1 process on the combined batch") {
  test::TempDir dir;
  // Dropout off: the two runs would draw different masks. 160 training examples: 10 steps of 16
  // either way, 8 per rank on 2 processes, with no padding.
  const Run one = train_gpt(without_dropout(small_run(dir.path(), "one", 16, 1)), 1);
  REQUIRE(one.exit_code == 0);
  const Run two = train_gpt(without_dropout(small_run(dir.path(), "two", 8, 1)), 2);
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(test::contains(two.output, "2 process(es)"));
  // The mean over 16 x 16 tokens against the average of two means over 8 x 16: equal up to f32
  // rounding (~1e-7), which 10 AdamW steps at lr 3e-4 keep far below 1e-4 in the weights and the loss.
  CHECK(weight_difference(dir.path() + "/one.safetensors", dir.path() + "/two.safetensors") < 1e-4);
  CHECK(std::abs(eval_losses(dir.path() + "/one.csv").back() - eval_losses(dir.path() + "/two.csv").back()) < 1e-4);
}

TEST_CASE("train_gpt --gradient-accumulation-steps 4 on batches of 4 equals batches of 16, counting optimizer steps") {
  test::TempDir dir;
  // Dropout off: the two runs would draw their masks in other shapes. 160 training examples: 10
  // batches of 16, or 40 micro-batches of 4 making 10 steps.
  REQUIRE(train_gpt(without_dropout(small_run(dir.path(), "whole", 16, 1))).exit_code == 0);
  std::vector<std::string> accumulated = without_dropout(small_run(dir.path(), "accumulated", 4, 1));
  accumulated.insert(accumulated.end(), {"--gradient-accumulation-steps", "4"});
  const Run run = train_gpt(accumulated);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(test::contains(run.output, "tokens per process and micro-batch, 4 micro-batches per step"));
  CHECK(test::contains(run.output, " 10/10 "));  // the progress bar counts optimizer steps
  CHECK(last_step(dir.path() + "/accumulated.csv") == 10);
  // Four means over 4 x 16 tokens weighted 1/4 against one mean over 16 x 16, the gradient clipped
  // once per step either way: equal up to f32 rounding, as for 2 processes against 1.
  CHECK(weight_difference(dir.path() + "/whole.safetensors", dir.path() + "/accumulated.safetensors") < 1e-4);
  CHECK(std::abs(eval_losses(dir.path() + "/whole.csv").back() - eval_losses(dir.path() + "/accumulated.csv").back()) <
        1e-4);
  std::vector<std::string> zero = small_run(dir.path(), "refused", 4, 1);
  zero.push_back("trainer_config.gradient_accumulation_steps=0");
  const Run refused = train_gpt(zero);
  CHECK(refused.exit_code != 0);
  CHECK(test::contains(refused.output, "trainer_config.gradient_accumulation_steps must be >= 1, got 0"));
}

TEST_CASE("train_gpt on 2 ranks given texts of one vocabulary size but other characters stops on both ranks") {
  test::TempDir dir;
  // 216 characters each, as write_text's: the same number of examples, of vocabulary sizes 3 and 3.
  std::string abc, abd;
  for (int i = 0; i < 72; ++i) abc += "abc", abd += "abd";
  std::ofstream(dir.path() + "/text0.txt") << abc;
  std::ofstream(dir.path() + "/text1.txt") << abd;
  std::vector<std::string> args = small_run(dir.path(), "texts", 8, 1);
  for (std::string& arg : args)
    if (arg.starts_with("data_config.path=")) arg = "data_config.path=" + dir.path() + "/text{rank}.txt";
  const test::RankResults result = test::run_ranks(SG_TRAIN_GPT, 2, args, {}, 60);
  INFO(result.summary());
  CHECK(!result.timed_out);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) != 0);
    CHECK(test::contains(result.output(rank), "ranks disagree on vocabulary: rank 0 has abc, rank 1 has abd"));
  }
}

TEST_CASE(
    "under sgrun --max-restarts 1 a worker killed mid-epoch resumes from the snapshot and ends as an unkilled run") {
  test::TempDir dir;
  // Uninterrupted: 2 processes, 2 epochs of 10 steps.
  REQUIRE(train_gpt(small_run(dir.path(), "plain", 8, 2), 2).exit_code == 0);
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", SG_TRAIN_GPT};
  for (const std::string& arg : small_run(dir.path(), "killed", 8, 2)) args.push_back(arg);
  // Rank 1 dies after step 13, in epoch 2; the snapshot of epoch 1 is on disk.
  const test::RankResults sgrun = test::run_ranks(SG_SGRUN, 1, args, {{"SG_TEST_KILL_AT_STEP", "13"}}, 120);
  INFO(sgrun.summary());
  CHECK(sgrun.exit_code(0) == 0);
  CHECK(test::contains(sgrun.output(0), "restarting (attempt 1 of 1)"));
  CHECK(test::contains(sgrun.output(0), "at Epoch 1"));
  CHECK(weight_difference(dir.path() + "/plain.safetensors", dir.path() + "/killed.safetensors") == 0);
  CHECK(eval_losses(dir.path() + "/plain.csv").back() == eval_losses(dir.path() + "/killed.csv").back());
}

TEST_CASE("with save_every_steps a worker killed mid-epoch resumes from the newest step snapshot, bit-identical") {
  test::TempDir dir;
  REQUIRE(train_gpt(small_run(dir.path(), "plain", 8, 2), 2).exit_code == 0);
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", SG_TRAIN_GPT};
  for (const std::string& arg : small_run(dir.path(), "killed", 8, 2)) args.push_back(arg);
  args.insert(args.end(), {"trainer_config.save_every_steps=4", "trainer_config.keep=2"});
  // Rank 1 dies after step 13, in epoch 2: the step snapshots of steps 8 and 12 are kept (that of
  // 4 removed), and step 12's is newer than the epoch snapshot of step 10.
  const test::RankResults sgrun = test::run_ranks(SG_SGRUN, 1, args, {{"SG_TEST_KILL_AT_STEP", "13"}}, 120);
  INFO(sgrun.summary());
  CHECK(sgrun.exit_code(0) == 0);
  const std::string steps = dir.path() + "/killed.safetensors.steps/checkpoints";
  CHECK(test::contains(sgrun.output(0), steps + "/checkpoint_2/state.safetensors at Epoch 1 (step 12)"));
  // The restarted run went on numbering: steps 16 and 20 are checkpoint_3 and checkpoint_4.
  CHECK(std::filesystem::exists(steps + "/checkpoint_4"));
  CHECK_FALSE(std::filesystem::exists(steps + "/checkpoint_2"));
  CHECK(weight_difference(dir.path() + "/plain.safetensors", dir.path() + "/killed.safetensors") == 0);
  CHECK(eval_losses(dir.path() + "/plain.csv").back() == eval_losses(dir.path() + "/killed.csv").back());
}

TEST_CASE("train_gpt on a text of fewer than 10 distinct characters ends with its sample (top_k 10 keeps all 4)") {
  test::TempDir dir;
  const std::string dna = dir.path() + "/dna.txt";
  std::string text;
  for (int i = 0; i < 216; ++i) text += "ACGT"[(i * 7 + i / 5) % 4];
  std::ofstream(dna) << text;
  std::vector<std::string> args = small_run(dir.path(), "dna", 16, 1);
  args[0] = "data_config.path=" + dna;
  const Run run = train_gpt(args);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(test::contains(run.output, "Data has 216 characters, 4 unique."));
  CHECK(test::contains(run.output, "--- sample (20 tokens, top_k 10) ---"));
}

TEST_CASE("train_gpt stops after --max-nonfinite-steps inf or NaN losses in a row and keeps the snapshot before") {
  test::TempDir dir;
  const std::string snapshot = dir.path() + "/a.safetensors";
  REQUIRE(train_gpt(small_run(dir.path(), "a", 16, 1)).exit_code == 0);  // epoch 1: steps 1 to 10
  test::set_snapshot_lr(snapshot, 1e30);                                 // epoch 2 diverges in a step or two
  const std::string good = test::read_text(snapshot);
  std::vector<std::string> resumed = small_run(dir.path(), "a", 16, 2);
  resumed.insert(resumed.end(), {"--max-nonfinite-steps", "3"});
  Run diverged = train_gpt(resumed);
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_gpt: the loss went non-finite ("));
  CHECK(test::contains(diverged.output, " and stayed so for 3 consecutive steps, to step 1"));
  CHECK(test::contains(diverged.output, "so training stopped (--max-nonfinite-steps 3; 0 never stops)"));
  CHECK(!test::contains(diverged.output, "Snapshot saved at epoch 2"));
  CHECK(test::read_text(snapshot) == good);
  resumed.back() = "0";
  diverged = train_gpt(resumed);
  INFO(diverged.output);
  CHECK(diverged.exit_code == 1);
  CHECK(test::contains(diverged.output, "train_gpt: not writing " + snapshot + " after step 20: the model's "));
  CHECK(!test::contains(diverged.output, "--- sample"));
  CHECK(test::read_text(snapshot) == good);
}

TEST_CASE("train_gpt --zero on 2 processes trains to plain DDP's weights while each rank keeps half the state") {
  test::TempDir dir;
  REQUIRE(train_gpt(small_run(dir.path(), "plain", 8, 2), 2).exit_code == 0);
  std::vector<std::string> args = small_run(dir.path(), "zero", 8, 2);
  args.push_back("--zero");
  const Run zero = train_gpt(args, 2);
  INFO(zero.output);
  REQUIRE(zero.exit_code == 0);
  // gpt-nano's blocks are equal, so its whole parameters split evenly.
  CHECK(test::contains(zero.output, "ZeRO-1 over 2 processes: optimizer state per rank 0.38 | 0.38 of 0.76 MB"));
  // The same updates, computed by each parameter's owner and copied to the other rank bit for bit.
  CHECK(weight_difference(dir.path() + "/plain.safetensors", dir.path() + "/zero.safetensors") == 0);
  CHECK(eval_losses(dir.path() + "/plain.csv") == eval_losses(dir.path() + "/zero.csv"));
  // The snapshot holds the whole AdamW state, gathered on rank 0: plain DDP's, key for key.
  const SafetensorsFile plain = load_safetensors(dir.path() + "/plain.safetensors");
  const SafetensorsFile sharded = load_safetensors(dir.path() + "/zero.safetensors");
  CHECK(plain.tensors.size() == sharded.tensors.size());
  for (const auto& [name, tensor] : plain.tensors) {
    CAPTURE(name);
    REQUIRE(sharded.tensors.count(name) == 1);
    CHECK(test::max_abs_diff(tensor, sharded.tensors.at(name)) == 0);
  }
}

TEST_CASE("train_gpt --zero-shard-gradients on 2 processes trains as --zero alone and says ZeRO-2 on its start line") {
  test::TempDir dir;
  std::vector<std::string> args = small_run(dir.path(), "zero1", 8, 2);
  args.push_back("--zero");
  REQUIRE(train_gpt(args, 2).exit_code == 0);
  args = small_run(dir.path(), "zero2", 8, 2);
  args.insert(args.end(), {"--zero", "--zero-shard-gradients"});
  const Run sharded = train_gpt(args, 2);
  INFO(sharded.output);
  REQUIRE(sharded.exit_code == 0);
  CHECK(
      test::contains(sharded.output, "ZeRO-2 (gradients reduce-scattered) over 2 processes: optimizer state per rank"));
  // The same averages; only the clip's global norm is summed in another order (shard by shard),
  // so f32 rounding is all that may differ. The log prints 6 decimals.
  for (size_t column : {2, 3, 4}) {  // loss, eval_loss, grad_norm
    CAPTURE(column);
    const std::vector<double> zero1 = csv_column(dir.path() + "/zero1.csv", column);
    const std::vector<double> zero2 = csv_column(dir.path() + "/zero2.csv", column);
    REQUIRE(zero1.size() == zero2.size());
    REQUIRE(!zero1.empty());
    for (size_t i = 0; i < zero1.size(); ++i) CHECK(std::abs(zero1[i] - zero2[i]) <= 2e-6 + 1e-5 * std::abs(zero1[i]));
  }
  CHECK(weight_difference(dir.path() + "/zero1.safetensors", dir.path() + "/zero2.safetensors") <= 1e-5);
}

TEST_CASE("train_gpt refuses --zero-shard-gradients without --zero, and beside a --comm-hook") {
  test::TempDir dir;
  std::vector<std::string> args = small_run(dir.path(), "r", 8, 1);
  args.push_back("--zero-shard-gradients");
  Run run = train_gpt(args);
  CHECK(run.exit_code != 0);
  CHECK(test::contains(run.output, "--zero-shard-gradients requires --zero"));
  args.insert(args.end(), {"--zero", "--comm-hook", "fp16"});
  run = train_gpt(args);
  CHECK(run.exit_code != 0);
  CHECK(test::contains(run.output, "so it cannot also send them through comm_hook \"fp16\"; set comm_hook to \"no\""));
}
