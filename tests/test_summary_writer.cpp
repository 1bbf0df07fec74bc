// data::SummaryWriter: the CRC-32C and TFRecord framing checked here byte by byte, and what it
// writes read back by TensorBoard's own reader (tests/reference/read_tensorboard.py, in the
// virtual environment scripts/tensorboard-venv.sh creates; those tests are skipped with a message
// when it is absent). Also the Accelerator's trackers, on one process and under two.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "dist_harness.h"
#include "helpers.h"
#include "log/crc32c.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> random_bytes(size_t count, uint64_t seed) {
  Generator generator(seed);
  const Tensor values = randint(0, 256, {static_cast<int64_t>(count)}, {DType::u8, Device::cpu()}, &generator);
  const uint8_t* data = values.data_ptr<uint8_t>();
  return {data, data + count};
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

uint64_t load_little_endian(const std::string& bytes, size_t at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// The payloads of a file of TFRecords, each record's two checksums verified.
std::vector<std::string> read_records(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    const uint64_t length = load_little_endian(bytes, at, 8);
    CHECK(load_little_endian(bytes, at + 8, 4) == data::masked_crc32c(bytes.data() + at, 8));
    REQUIRE(at + 12 + length + 4 <= bytes.size());
    const std::string data = bytes.substr(at + 12, length);
    CHECK(load_little_endian(bytes, at + 12 + length, 4) == data::masked_crc32c(data.data(), data.size()));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// The one event file directly in `directory`.
std::string only_event_file(const std::string& directory) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) files.push_back(entry.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

// TensorBoard's reading of `log_dir` (read_tensorboard.py's JSON), or null with a message when the
// virtual environment with tensorboard is absent.
std::optional<nlohmann::json> read_with_tensorboard(const std::string& log_dir) {
  if (!fs::exists(SG_TENSORBOARD_PYTHON)) {
    MESSAGE("skipped: no Python with tensorboard at " SG_TENSORBOARD_PYTHON
            " (scripts/tensorboard-venv.sh creates "
            "it; scripts/test.sh runs that script)");
    return std::nullopt;
  }
  const std::string command = std::string(SG_TENSORBOARD_PYTHON) +
                              " " SG_SOURCE_DIR "/tests/reference/read_tensorboard.py '" + log_dir + "' 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  INFO("read_tensorboard.py said: ", output);
  REQUIRE(status == 0);
  return nlohmann::json::parse(output);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');) cells.push_back(cell);
  return cells;
}

// Scalars travel as f32 (the Summary's simple_value): what TensorBoard shows is the value rounded
// to f32 exactly, no tolerance needed.
double as_f32(double value) { return static_cast<float>(value); }

}  // namespace

TEST_CASE("crc32c gives the published CRC-32C of the check string and of RFC 3720's test vectors") {
  const std::string check = "123456789";
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xff), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i)
    ascending[i] = static_cast<unsigned char>(i), descending[i] = static_cast<unsigned char>(31 - i);
  for (auto crc : {data::crc32c, data::crc32c_portable}) {
    CHECK(crc(check.data(), check.size()) == 0xE3069283u);
    CHECK(crc(zeros.data(), zeros.size()) == 0x8A9136AAu);
    CHECK(crc(ones.data(), ones.size()) == 0x62A8AB43u);
    CHECK(crc(ascending.data(), ascending.size()) == 0x46DD794Eu);
    CHECK(crc(descending.data(), descending.size()) == 0x113FDB5Cu);
    CHECK(crc(check.data(), 0) == 0u);
  }
  MESSAGE("crc32c runs on ",
          std::string(data::crc32c_uses_crc32_instruction() ? "the crc32 instruction" : "crcutil's tables"));
}

TEST_CASE("crc32c on the crc32 instruction equals the table-driven CRC for every length to 300 at odd offsets") {
  const std::vector<unsigned char> bytes = random_bytes(4096 + 303, 13);
  for (size_t length = 0; length <= 300; ++length)
    for (size_t offset : {size_t{0}, size_t{1}, size_t{3}, size_t{7}})
      REQUIRE(data::crc32c(bytes.data() + offset, length) == data::crc32c_portable(bytes.data() + offset, length));
  // Long enough for crcutil's striped SSE4.2 blocks (512 bytes and up).
  CHECK(data::crc32c(bytes.data() + 5, 4096) == data::crc32c_portable(bytes.data() + 5, 4096));
}

TEST_CASE("masked_crc32c is TFRecord's rotated and offset CRC, as TensorBoard's own masked_crc32c gives it") {
  const std::string check = "123456789";
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(b"123456789") and (b"").
  CHECK(data::masked_crc32c(check.data(), check.size()) == 0xC78AB0E5u);
  CHECK(data::masked_crc32c(check.data(), 0) == 0xA282EAD8u);
}

TEST_CASE("an event file is a sequence of TFRecords, named as TensorBoard names them, opened by the file version") {
  test::TempDir log_dir;
  {
    data::SummaryWriter writer(log_dir.path() + "/run", {.filename_suffix = ".v2"});
    writer.add_scalar("loss", 0.5, 1);
    writer.add_text("note", "hello", 2);
  }
  const std::string path = only_event_file(log_dir.path() + "/run");
  const std::regex name(R"(events\.out\.tfevents\.\d{10}\.[^.]+.*\.\d+\.\d+\.v2)");
  CHECK_MESSAGE(std::regex_match(fs::path(path).filename().string(), name), path);
  const std::vector<std::string> records = read_records(path);
  REQUIRE(records.size() == 3);  // the version, the scalar, the text
  CHECK(records[0].find("brain.Event:2") != std::string::npos);
  CHECK(records[2].find("hello") != std::string::npos);
}

TEST_CASE("TensorBoard reads back scalars, add_scalars runs, an image and text as they were written") {
  test::TempDir log_dir;
  Generator generator(5);
  const Tensor losses = rand({6}, {DType::f64, Device::cpu()}, &generator);
  // Values beyond [0, 1] check the clipping; u8 pixels are taken as they are.
  const Tensor rgb = sub(mul(rand({3, 5, 7}, {}, &generator), 1.2), 0.1);
  const Tensor grey = randint(0, 256, {1, 4, 3}, {DType::u8, Device::cpu()}, &generator);
  {
    data::SummaryWriter writer(log_dir.path());
    for (int64_t step = 0; step < losses.size(0); ++step)
      writer.add_scalar("loss/train", losses.data_ptr<double>()[step], step);
    writer.add_scalars("loss/compare", {{"train", 0.25}, {"test", 1.0 / 3.0}}, 10);
    writer.add_scalars("loss/compare", {{"train", 0.125}, {"test", 0.2}}, 20);
    writer.add_image("samples/rgb", rgb, 3);
    writer.add_image("samples/grey", grey, 4);
    writer.add_text("notes", "lr **0.005**, 64 images per step", 7);
  }
  const auto read = read_with_tensorboard(log_dir.path());
  if (!read) return;
  const nlohmann::json& runs = (*read)["runs"];
  INFO(runs.dump().substr(0, 2000));
  REQUIRE(runs.size() == 3);  // the writer's own and one per add_scalars key

  const nlohmann::json& main = runs["."];
  CHECK(main["event_files"] == 1);
  CHECK(main["file_version"] == 2.0);
  const nlohmann::json& loss = main["scalars"]["loss/train"];
  REQUIRE(loss.size() == 6);
  for (int64_t step = 0; step < 6; ++step) {
    CHECK(loss[step][0] == step);
    CHECK(loss[step][1].get<double>() == as_f32(losses.data_ptr<double>()[step]));
  }
  CHECK(runs["loss_compare_train"]["scalars"]["loss/compare"] == nlohmann::json{{10, 0.25}, {20, 0.125}});
  CHECK(runs["loss_compare_test"]["scalars"]["loss/compare"] ==
        nlohmann::json{{10, as_f32(1.0 / 3.0)}, {20, as_f32(0.2)}});

  // torch's rule: floating-point pixels times 255, clipped to [0, 255], truncated; grey as RGB.
  const nlohmann::json& rgb_read = main["images"]["samples/rgb"][0];
  CHECK(rgb_read["step"] == 3);
  CHECK(rgb_read["width"] == 7);
  CHECK(rgb_read["height"] == 5);
  REQUIRE(rgb_read["png"]["channels"] == 3);
  const std::vector<int> rgb_pixels = rgb_read["png"]["pixels"];
  REQUIRE(rgb_pixels.size() == 5 * 7 * 3);
  const float* rgb_values = rgb.data_ptr<float>();
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x)
      for (int c = 0; c < 3; ++c)
        CHECK(rgb_pixels[(y * 7 + x) * 3 + c] ==
              static_cast<int>(std::clamp(rgb_values[(c * 5 + y) * 7 + x] * 255.0f, 0.0f, 255.0f)));
  const nlohmann::json& grey_read = main["images"]["samples/grey"][0];
  CHECK(grey_read["width"] == 3);
  CHECK(grey_read["height"] == 4);
  REQUIRE(grey_read["png"]["channels"] == 3);
  const std::vector<int> grey_pixels = grey_read["png"]["pixels"];
  const uint8_t* grey_values = grey.data_ptr<uint8_t>();
  for (int i = 0; i < 4 * 3; ++i)
    for (int c = 0; c < 3; ++c) CHECK(grey_pixels[i * 3 + c] == grey_values[i]);

  CHECK(main["texts"]["notes/text_summary"] == nlohmann::json{{7, "lr **0.005**, 64 images per step"}});
}

TEST_CASE("events reach the file on the flush timer, without a flush call, and close writes the rest") {
  test::TempDir log_dir;
  data::SummaryWriter writer(log_dir.path(), {.flush_secs = 0.05});
  writer.add_scalar("loss", 1.5, 1);
  // A few hundred bytes sit in the stdio buffer until something flushes them; only the timer does here.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs::file_size(writer.file_path()) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(read_records(writer.file_path()).size() == 2);
  writer.add_scalar("loss", 1.25, 2);
  writer.close();
  CHECK(read_records(writer.file_path()).size() == 3);
  CHECK_THROWS_WITH_AS(writer.add_scalar("loss", 1.0, 3),
                       doctest::Contains((log_dir.path() + "': add_scalar after close()").c_str()), Error);
  writer.close();  // idempotent
}

TEST_CASE("a writer made without a directory writes nothing and takes every call") {
  data::SummaryWriter writer;
  CHECK_FALSE(writer.enabled());
  CHECK(writer.log_dir().empty());
  writer.add_scalar("loss", 1, 1);
  writer.add_scalars("loss", {{"a", 1}}, 1);
  writer.add_image("image", zeros({7}), 1);  // not even checked: nothing is written
  writer.add_text("text", "t", 1);
  writer.flush();
  writer.close();
}

TEST_CASE("add_image names the tag and the shape or dtype it refuses") {
  test::TempDir log_dir;
  data::SummaryWriter writer(log_dir.path());
  CHECK_THROWS_WITH_AS(writer.add_image("a", zeros({5, 7}), 0),
                       doctest::Contains("add_image('a'): expected a CHW image with 1, 3 or 4 channels"), Error);
  CHECK_THROWS_WITH_AS(writer.add_image("b", zeros({2, 5, 7}), 0), doctest::Contains("got shape [2, 5, 7]"), Error);
  CHECK_THROWS_WITH_AS(writer.add_image("c", zeros({3, 0, 7}), 0), doctest::Contains("got shape [3, 0, 7]"), Error);
  CHECK_THROWS_WITH_AS(writer.add_image("d", zeros({3, 5, 7}, {DType::i64, Device::cpu()}), 0),
                       doctest::Contains("add_image('d'): expected floating-point values in [0, 1] or u8"), Error);
}

TEST_CASE("a log directory that cannot be created, and a flush interval that is not positive, are errors naming them") {
  test::TempDir scratch;
  const std::string blocker = scratch.path() + "/file";
  std::ofstream(blocker) << "in the way";
  const std::string below_file = "cannot create the log directory '" + blocker + "/run'";
  CHECK_THROWS_WITH_AS(data::SummaryWriter{blocker + "/run"}, doctest::Contains(below_file.c_str()), Error);
  const std::string file_itself = "cannot create the log directory '" + blocker + "'";
  CHECK_THROWS_WITH_AS(data::SummaryWriter{blocker}, doctest::Contains(file_itself.c_str()), Error);
  CHECK_THROWS_WITH_AS(data::SummaryWriter(scratch.path(), {.flush_secs = 0}),
                       doctest::Contains("flush_secs must be positive"), Error);
  CHECK_THROWS_WITH_AS(data::SummaryWriter{""}, doctest::Contains("the log directory is empty"), Error);
}

TEST_CASE("on one process the accelerator's trackers write what log() and get_tracker() are given") {
  REQUIRE(std::getenv("WORLD_SIZE") == nullptr);
  test::TempDir log_dir;
  dist::Accelerator accelerator;
  CHECK_FALSE(accelerator.get_tracker().enabled());  // before init_trackers: a writer that writes nothing
  accelerator.log({{"loss", 2.0}}, 0);
  accelerator.init_trackers(log_dir.path());
  accelerator.log({{"loss", 0.75}, {"lr", 0.01}}, 1);
  accelerator.get_tracker().add_text("config", "cnn", 0);
  accelerator.end_training();
  const std::vector<std::string> records = read_records(only_event_file(log_dir.path()));
  CHECK(records.size() == 4);  // the version, two scalars, the text
  const auto read = read_with_tensorboard(log_dir.path());
  if (!read) return;
  const nlohmann::json& main = (*read)["runs"]["."];
  CHECK(main["scalars"]["loss"] == nlohmann::json{{1, 0.75}});
  CHECK(main["scalars"]["lr"] == nlohmann::json{{1, as_f32(0.01)}});
  CHECK(main["texts"]["config/text_summary"] == nlohmann::json{{0, "cnn"}});
}

#ifdef SG_TRAIN_CNN
TEST_CASE("train_cnn --tensorboard under two processes leaves one run, written by the main process") {
  if (!fs::is_directory(data::FashionMNIST::kDefaultRoot)) {
    MESSAGE("skipped: no Fashion-MNIST at ", data::FashionMNIST::kDefaultRoot);
    return;
  }
  test::TempDir scratch;
  const std::string log_dir = scratch.path() + "/tb", csv = scratch.path() + "/log.csv";
  const test::RankResults results =
      test::run_ranks(SG_TRAIN_CNN, 2,
                      {"--tensorboard", log_dir, "--log", csv, "--train-subset", "256", "--test-subset", "500",
                       "--batch-size", "32", "--epochs", "1", "--amp", "f16"},
                      {}, 120);
  REQUIRE_MESSAGE(results.all_succeeded(), results.summary());
  const auto read = read_with_tensorboard(log_dir);
  if (!read) return;
  const nlohmann::json& runs = (*read)["runs"];
  REQUIRE(runs.size() == 1);
  const nlohmann::json& main = runs["."];
  CHECK(main["event_files"] == 1);  // none from rank 1
  // 256 images over 2 processes x 32 per step: 4 steps; the main rank's losses, as in its CSV log.
  const nlohmann::json& losses = main["scalars"]["loss/train"];
  REQUIRE(losses.size() == 4);
  std::ifstream log(csv);
  std::string line;
  std::getline(log, line);
  CHECK(line == "step,epoch,loss,lr,accuracy,scale,skipped_steps");
  for (int step = 1; step <= 4; ++step) {
    std::getline(log, line);
    CHECK(losses[step - 1][0] == step);
    // The CSV prints 6 decimals; the event file holds the f32 value.
    CHECK(losses[step - 1][1].get<double>() == doctest::Approx(std::stod(split_csv_line(line).at(2))).epsilon(1e-5));
  }
  CHECK(main["scalars"]["lr"].size() == 4);
  // GradScaler's scale: 2^16 at the start, halved on each step whose f16 gradients overflowed.
  const double scale = main["scalars"]["amp/loss_scale"][0][1];
  CHECK(scale <= 65536.0);
  CHECK(scale == std::exp2(std::round(std::log2(scale))));
  REQUIRE(main["scalars"]["accuracy/test"].size() == 1);
  CHECK(main["scalars"]["accuracy/test"][0][0] == 4);
  CHECK(main["scalars"]["loss/test"].size() == 1);
}
#endif
