// safetensors files, atomic writes and model + optimizer checkpoints.
//
// Python's `safetensors` package is not installed for /usr/bin/python3 here (and pip may not
// install into the system Python), so there is no cross-check against it; instead the bytes
// are checked against the published layout directly ("the file layout is ...").
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/atomic_file.h"
#include "helpers.h"
#include "nn/module.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {
// A fresh directory per test case, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("sg_test_checkpoint_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A file made of an 8-byte little-endian length, `header` and `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data, uint64_t length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(length >> (8 * i));
  return out + header + data;
}
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return safetensors_bytes(header, data, header.size());
}

// `bytes` with the first `from` after `after` replaced by `to` (of the same length, so every
// offset in the file stays valid): how a tensor gets relabelled or a number changed in a file.
std::string replaced_after(const std::string& bytes, const std::string& after, const std::string& from,
                           const std::string& to) {
  REQUIRE(from.size() == to.size());
  const size_t anchor = bytes.find(after);
  REQUIRE(anchor != std::string::npos);
  const size_t at = bytes.find(from, anchor);
  REQUIRE(at != std::string::npos);
  return bytes.substr(0, at) + to + bytes.substr(at + from.size());
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && test::values(a) == test::values(b);
}

// A two-layer model: y = relu(x * w1 + b1) . w2, with a buffer.
struct TinyNet : nn::Module {
  Tensor w1, b1, w2, steps;
  explicit TinyNet(int64_t hidden = 4) {
    w1 = register_parameter("w1", randn({3, hidden}, {DType::f64}, &test::rng()));
    b1 = register_parameter("b1", zeros({hidden}, {DType::f64}));
    w2 = register_parameter("w2", randn({hidden, 1}, {DType::f64}, &test::rng()));
    steps = register_buffer("steps", zeros({1}, {DType::i64}));
  }
  Tensor forward(const Tensor& x) override { return (x.matmul(w1) + b1).relu().matmul(w2); }
  std::string type_name() const override { return "TinyNet"; }
};

void train(TinyNet& model, optim::Optimizer& optimizer, const Tensor& x, int steps) {
  for (int t = 0; t < steps; ++t) {
    optimizer.zero_grad();
    model(x).pow(2.0).mean().backward();
    optimizer.step();
  }
}
}  // namespace

TEST_CASE("safetensors round-trips every dtype, views and 0-dim tensors") {
  TempDir dir;
  Tensor base = randn({4, 6}, {}, &test::rng());
  std::map<std::string, Tensor> tensors{
      {"f32", base},
      {"f64_transposed", base.to(DType::f64).t()},  // non-contiguous: written row-major
      {"f16_slice", base.to(DType::f16).slice(1, 1, 6, 2)},
      {"bf16", base.to(DType::bf16)},
      {"i64", arange(-5, 7)},
      {"i32", arange(0, 6, 1, {DType::i32}).reshape({2, 3})},
      {"u8", arange(250, 256, 1, {DType::u8})},
      {"bool", gt(base, 0.0)},
      {"scalar", scalar_tensor(2.5, {DType::f64})},
      {"empty", zeros({0, 3})},
  };
  const std::map<std::string, std::string> metadata{{"epoch", "3"}, {"note", "ünïcode and \"quotes\""}};
  save_safetensors(dir / "all.safetensors", tensors, metadata);
  const SafetensorsFile loaded = load_safetensors(dir / "all.safetensors");
  CHECK(loaded.metadata == metadata);
  REQUIRE(loaded.tensors.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) {
    INFO(name);
    CHECK(same_tensor(loaded.tensors.at(name), tensor));
    CHECK(loaded.tensors.at(name).is_contiguous());
  }
  CHECK(loaded.tensors.at("scalar").dim() == 0);
}

TEST_CASE("the file layout is the published one, readable with no library") {
  TempDir dir;
  const std::string path = dir / "layout.safetensors";
  save_safetensors(path, {{"b", tensor(std::vector<float>{1.0f, -2.0f})}, {"a", scalar_tensor(1.0, {DType::u8})}},
                   {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  // Keys in name order, tensors back to back in name order, header padded to 8 bytes.
  const std::string header = R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[0,1],"dtype":"U8","shape":[]},)"
                             R"("b":{"data_offsets":[1,9],"dtype":"F32","shape":[2]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  float values[2] = {1.0f, -2.0f};
  std::string data(1, '\x01');
  data.append(reinterpret_cast<const char*>(values), sizeof(values));
  CHECK(bytes == safetensors_bytes(padded, data));
  CHECK(padded.size() % 8 == 0);
}

TEST_CASE("load_safetensors names the file and the problem in a corrupt file") {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  const std::string good_header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight_bytes(8, '\0');
  auto check_error = [&](const std::string& bytes, const std::string& problem) {
    write_bytes(path, bytes);
    CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains(("load_safetensors: " + path + ": ").c_str()),
                         Error);
    CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains(problem.c_str()), Error);
  };
  write_bytes(path, safetensors_bytes(good_header, eight_bytes));
  CHECK(load_safetensors(path).tensors.at("x").numel() == 2);  // the baseline is valid

  check_error("abc", "fewer than the 8 of the header length");
  check_error(safetensors_bytes(good_header, eight_bytes).substr(0, 40), "exceeds the");  // truncated header
  check_error(safetensors_bytes(good_header, eight_bytes, 1u << 20), "the header length 1048576 exceeds");
  check_error(safetensors_bytes(good_header, eight_bytes.substr(0, 4)), "lie outside the 4-byte data section");
  check_error(safetensors_bytes("{not json}", ""), "not valid JSON");
  check_error(safetensors_bytes(R"([1, 2])", ""), "not a JSON object");
  check_error(safetensors_bytes(R"({"x":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", "ab"),
              "tensor 'x': unknown dtype \"F8\"");
  check_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight_bytes),
              "need 12 bytes, but data_offsets span 8");
  check_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight_bytes),
              "holds something other than a size");
  check_error(
      safetensors_bytes(R"({"x":{"dtype":"F32","shape":[4611686018427387904, 4],"data_offsets":[0,8]}})", eight_bytes),
      "need more bytes");
  check_error(safetensors_bytes(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[4,2]}})", eight_bytes),
              "data_offsets [4, 2] lie outside");
  check_error(safetensors_bytes(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                R"("y":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                eight_bytes),
              "tensors 'x' and 'y' overlap");
  check_error(safetensors_bytes(R"({"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
              "a BOOL byte is neither 0 nor 1");
  check_error(safetensors_bytes(R"({"__metadata__":{"epoch":3}})", ""), "metadata 'epoch' is not a string");
  CHECK_THROWS_WITH_AS(load_safetensors(dir / "missing.safetensors"), doctest::Contains("cannot open"), Error);
}

TEST_CASE("safetensors round-trips empty tensors at any position among many tensors") {
  // Among more than 16 tensors std::sort no longer keeps the order of equal keys, so an empty
  // tensor at [8, 8) could sort after the tensor at [8, 16) and look like an overlap.
  TempDir dir;
  const std::string path = dir / "empties.safetensors";
  for (const int count : {17, 24, 40}) {
    for (int first_empty = 0; first_empty < count; ++first_empty) {
      for (const int empties : {1, 3}) {
        std::map<std::string, Tensor> tensors;
        for (int i = 0; i < count; ++i) {
          char name[16];
          std::snprintf(name, sizeof name, "t%03d", i);  // name order = file order
          const bool empty = i >= first_empty && i < first_empty + empties;
          tensors[name] = empty ? zeros({0, 1 + i % 3}) : full({1 + i % 5}, static_cast<double>(i));
        }
        CAPTURE(count);
        CAPTURE(first_empty);
        CAPTURE(empties);
        save_safetensors(path, tensors);
        const SafetensorsFile loaded = load_safetensors(path);
        REQUIRE(loaded.tensors.size() == tensors.size());
        for (const auto& [name, tensor] : tensors) CHECK(same_tensor(loaded.tensors.at(name), tensor));
      }
    }
  }
}

TEST_CASE("load_safetensors reports data bytes that belong to no tensor, and empty tensors never overlap") {
  TempDir dir;
  const std::string path = dir / "layout.safetensors";
  const std::string eight_bytes(8, '\0');
  auto load = [&](const std::string& header, const std::string& data) {
    write_bytes(path, safetensors_bytes(header, data));
    return load_safetensors(path);
  };
  CHECK_THROWS_WITH_AS(load(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                            R"("y":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                            eight_bytes),
                       doctest::Contains("bytes [2, 4) of the data section, before tensor 'y', belong to no tensor"),
                       Error);
  CHECK_THROWS_WITH_AS(load(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", eight_bytes.substr(0, 4)),
                       doctest::Contains("bytes [0, 2) of the data section, before tensor 'x'"), Error);
  CHECK_THROWS_WITH_AS(load(R"({"x":{"dtype":"U8","shape":[6],"data_offsets":[0,6]}})", eight_bytes),
                       doctest::Contains("bytes [6, 8) at the end of the data section belong to no tensor"), Error);
  // Two tensors at the same begin overlap whichever sorts first.
  CHECK_THROWS_WITH_AS(load(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                            R"("y":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                            eight_bytes.substr(0, 4)),
                       doctest::Contains("overlap in the data section"), Error);
  // Empty tensors hold no bytes: one anywhere inside the data section shares none.
  const SafetensorsFile file = load(R"({"x":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                    R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}})",
                                    eight_bytes);
  CHECK(file.tensors.at("e").sizes() == Shape{0, 3});
}

TEST_CASE("load_safetensors refuses a shape whose strides overflow int64, naming the file") {
  TempDir dir;
  const std::string path = dir / "huge.safetensors";
  // No elements, so no bytes either; but the strides of [0, 2^32 - 1, 2^32 - 1] pass 2^63.
  write_bytes(path, safetensors_bytes(R"({"x":{"dtype":"F32","shape":[0,4294967295,4294967295],)"
                                      R"("data_offsets":[0,0]}})",
                                      ""));
  CHECK_THROWS_WITH_AS(load_safetensors(path),
                       doctest::Contains(("load_safetensors: " + path + ": tensor 'x': 'shape'").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains("has strides beyond 2^63 - 1"), Error);
}

TEST_CASE("save_safetensors checks its tensors before touching the file") {
  TempDir dir;
  const std::string path = dir / "weights.safetensors";
  save_safetensors(path, {{"w", ones({2})}});
  const std::string before = read_bytes(path);
  CHECK_THROWS_WITH_AS(save_safetensors(path, {{"a", ones({2})}, {"b", Tensor()}}),
                       doctest::Contains("tensor 'b' is undefined"), Error);
  CHECK_THROWS_WITH_AS(save_safetensors(path, {{"__metadata__", ones({2})}}), doctest::Contains("cannot name"), Error);
  CHECK(read_bytes(path) == before);
}

TEST_CASE("an atomic write that fails leaves the old file intact and no temporary file") {
  TempDir dir;
  const std::string path = dir / "state.bin";
  write_file_atomically(path, [](const ByteWriter& write) { write("old", 3); });
  CHECK(read_bytes(path) == "old");

  SUBCASE("the writer throws midway") {
    CHECK_THROWS_WITH_AS(write_file_atomically(path,
                                               [](const ByteWriter& write) {
                                                 write("new contents", 12);
                                                 throw Error("the third tensor is on a lost device");
                                               }),
                         doctest::Contains((path + ": the third tensor is on a lost device").c_str()), Error);
  }
  SUBCASE("the rename fails (the target is a non-empty directory)") {
    const std::string blocked = dir / "blocked";
    fs::create_directories(fs::path(blocked) / "inside");
    CHECK_THROWS_WITH_AS(save_safetensors(blocked, {{"w", ones({2})}}), doctest::Contains(blocked.c_str()), Error);
    CHECK(fs::is_directory(fs::path(blocked) / "inside"));
  }
  SUBCASE("the directory does not exist") {
    const std::string nowhere = dir / "no/such/dir/w.safetensors";
    CHECK_THROWS_WITH_AS(save_safetensors(nowhere, {{"w", ones({2})}}), doctest::Contains(nowhere.c_str()), Error);
  }
  CHECK(read_bytes(path) == "old");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path))
    files += entry.is_regular_file() && entry.path().string().find(".tmp.") != std::string::npos;
  CHECK(files == 0);
}

TEST_CASE("an atomic write that throws something other than a std::exception leaves no temporary file") {
  TempDir dir;
  const std::string path = dir / "state.bin";
  write_file_atomically(path, [](const ByteWriter& write) { write("old", 3); });
  CHECK_THROWS_AS(write_file_atomically(path,
                                        [](const ByteWriter& write) {
                                          write("new", 3);
                                          throw 42;
                                        }),
                  int);
  CHECK(read_bytes(path) == "old");
  CHECK(!fs::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST_CASE("an atomic write removes the temporary files of its target left by processes that are gone") {
  TempDir dir;
  const std::string path = dir / "snapshot.safetensors";
  // No process has a pid at or above pid_max; the test's parent is alive.
  std::ifstream pid_max_file("/proc/sys/kernel/pid_max");
  long pid_max = 0;
  pid_max_file >> pid_max;
  REQUIRE(pid_max > 0);
  const std::string dead = path + ".tmp." + std::to_string(pid_max);
  const std::string alive = path + ".tmp." + std::to_string(::getppid());
  const std::string other_target = dir / ("other.safetensors.tmp." + std::to_string(pid_max));
  const std::string not_a_pid = path + ".tmp.12ab";
  for (const std::string& name : {dead, alive, other_target, not_a_pid}) write_bytes(name, "half a file");

  save_safetensors(path, {{"w", ones({2})}});
  CHECK(!fs::exists(dead));
  CHECK(fs::exists(alive));
  CHECK(fs::exists(other_target));
  CHECK(fs::exists(not_a_pid));
  CHECK(load_safetensors(path).tensors.at("w").numel() == 2);
}

TEST_CASE("a checkpoint of model and optimizer resumes training identically") {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  Tensor x = randn({8, 3}, {DType::f64}, &test::rng());

  TinyNet straight;
  optim::AdamW straight_optimizer(straight.parameters(), {.lr = 0.01, .amsgrad = true});
  TinyNet interrupted;
  interrupted.load_state_dict(straight.state_dict());
  optim::AdamW interrupted_optimizer(interrupted.parameters(), {.lr = 0.01, .amsgrad = true});
  train(straight, straight_optimizer, x, 5);
  train(interrupted, interrupted_optimizer, x, 2);
  interrupted.steps.fill_(2);
  optim::save_checkpoint(path, interrupted, &interrupted_optimizer, {{"epoch", "2"}, {"run", "tiny"}});

  TinyNet resumed;  // other random weights, other lr: the checkpoint overrides both
  optim::AdamW resumed_optimizer(resumed.parameters(), {.lr = 0.5});
  const optim::Metadata metadata = optim::load_checkpoint(path, resumed, &resumed_optimizer);
  CHECK(metadata == optim::Metadata{{"epoch", "2"}, {"run", "tiny"}});
  CHECK(resumed_optimizer.lr(0) == 0.01);
  CHECK(test::values(resumed.steps) == std::vector<double>{2});
  train(resumed, resumed_optimizer, x, 3);
  for (const auto& [name, tensor] : straight.state_dict()) {
    if (name == "steps") continue;
    INFO(name);
    CHECK(test::values(resumed.state_dict().at(name)) == test::values(tensor));  // bit-identical
  }

  // The file is plain safetensors with the documented names.
  const SafetensorsFile file = load_safetensors(path);
  CHECK(file.tensors.count("model.w1") == 1);
  CHECK(file.tensors.count("optimizer.state.2.max_exp_avg_sq") == 1);
  CHECK(file.metadata.at("optimizer").find(R"("type":"AdamW")") != std::string::npos);
}

TEST_CASE("loading a checkpoint into a different model lists the offending keys") {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  TinyNet saved(4);
  optim::save_checkpoint(path, saved);

  TinyNet wider(5);
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, wider), doctest::Contains(path.c_str()), Error);
  try {
    optim::load_checkpoint(path, wider);
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("w1 (checkpoint [3, 4], model [3, 5])") != std::string::npos);
    CHECK(message.find("b1 (checkpoint [4], model [5])") != std::string::npos);
  }

  struct Other : nn::Module {
    Other() {
      register_parameter("w1", zeros({3, 4}, {DType::f64}));
      register_parameter("extra", zeros({1}));
    }
  } other;
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, other), doctest::Contains("missing keys: extra"), Error);
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, other), doctest::Contains("unexpected keys: b1, steps, w2"), Error);
  CHECK_NOTHROW(optim::load_checkpoint(path, other, nullptr, /*strict=*/false));

  optim::SGD sgd(saved.parameters());
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, saved, &sgd), doctest::Contains("holds no optimizer state"), Error);
  CHECK_THROWS_WITH_AS(optim::save_checkpoint(path, saved, nullptr, {{"optimizer", "x"}}),
                       doctest::Contains("reserved"), Error);
}

TEST_CASE("a checkpoint tensor relabelled to another dtype of the same size is refused, naming key and dtypes") {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  TinyNet model;
  optim::Adam optimizer(model.parameters(), {.lr = 0.01});
  train(model, optimizer, randn({8, 3}, {DType::f64}, &test::rng()), 1);
  optim::save_checkpoint(path, model, &optimizer);
  const std::string bytes = read_bytes(path);

  // F64 and I64 have the same size: only the label tells them apart.
  write_bytes(path, replaced_after(bytes, R"("model.w1")", "F64", "I64"));
  TinyNet target;
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, target), doctest::Contains(path.c_str()), Error);
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, target), doctest::Contains("w1 (checkpoint i64, model f64)"),
                       Error);

  write_bytes(path, replaced_after(bytes, R"("optimizer.state.0.exp_avg")", "F64", "I64"));
  optim::Adam target_optimizer(target.parameters());
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, target, &target_optimizer), doctest::Contains(path.c_str()), Error);
  CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, target, &target_optimizer),
                       doctest::Contains("state.0.exp_avg is i64, its parameter f64"), Error);
}

TEST_CASE("a checkpoint with a negative lr or step count is refused, naming the file and the key") {
  TempDir dir;
  const std::string path = dir / "ckpt.safetensors";
  TinyNet model;
  optim::Adam optimizer(model.parameters(), {.lr = 0.01});
  train(model, optimizer, randn({8, 3}, {DType::f64}, &test::rng()), 1);

  SUBCASE("lr") {
    optim::save_checkpoint(path, model, &optimizer);
    write_bytes(path, replaced_after(read_bytes(path), R"(\"lr\":)", "0.01", "-1.0"));
    optim::Adam target(model.parameters(), {.lr = 0.5});
    CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, model, &target), doctest::Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(
        optim::load_checkpoint(path, model, &target),
        doctest::Contains("group 0: Adam/AdamW: invalid learning rate -1 (lr must be finite and >= 0)"), Error);
    CHECK(target.lr(0) == 0.5);  // unchanged
  }
  SUBCASE("step") {
    optim::save_checkpoint(path, model, &optimizer);
    SafetensorsFile file = load_safetensors(path);
    file.tensors["optimizer.state.0.step"] = scalar_tensor(-1000, {DType::i64});
    save_safetensors(path, file.tensors, file.metadata);
    optim::Adam target(model.parameters());
    CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, model, &target), doctest::Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(optim::load_checkpoint(path, model, &target),
                         doctest::Contains("state.0.step is -1000; a saved step count is at least 1"), Error);
  }
}

TEST_CASE("metadata_integer reads a whole base-10 number in range, else names the file and the key") {
  const optim::Metadata metadata{{"epoch", "3"},
                                 {"negative", "-5"},
                                 {"suffix", "1abc"},
                                 {"space", " 7"},
                                 {"plus", "+7"},
                                 {"empty", ""},
                                 {"huge", "99999999999999999999"}};
  CHECK(optim::metadata_integer(metadata, "epoch", "run.safetensors", 0, 10) == 3);
  const auto error_of = [&](const std::string& key) {
    try {
      optim::metadata_integer(metadata, key, "run.safetensors", 0, 1000);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("negative") == "checkpoint run.safetensors: metadata 'negative' is -5, outside [0, 1000]");
  CHECK(error_of("suffix") == "checkpoint run.safetensors: metadata 'suffix' is \"1abc\", not a whole number");
  for (const char* key : {"space", "plus", "empty", "huge"}) {
    CAPTURE(key);
    CHECK(error_of(key).find(std::string("metadata '") + key + "' is \"") != std::string::npos);
  }
  CHECK(error_of("step") == "checkpoint run.safetensors: no metadata entry 'step'");
}
