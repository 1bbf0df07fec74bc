// dist::SharedMemoryAllReduce with its ranks on threads of one process (a real TcpStore for the
// setup): the values over several rounds, the agreement to fall back, segments with no name and
// no descriptor left after setup, and the errors. tests/test_dist_collectives.cpp runs it across
// processes, tests/test_launcher_recovery.cpp stops such processes while they set it up.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "dist/shm_all_reduce.h"
#include "dist/tcp_store.h"
#include "launch/launcher.h"

using namespace sg::dist;
using namespace std::chrono_literals;

namespace {

void add_floats(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    static_cast<float*>(c)[i] = static_cast<const float*>(a)[i] + static_cast<const float*>(b)[i];
}

// `ranks` threads, each with its own store client, each running `body(rank, store)`; returns
// what each threw ("" for none).
std::vector<std::string> on_threads(int ranks, const std::function<void(int, TcpStore&)>& body) {
  const int port = find_free_port();
  TcpStore server("127.0.0.1", port, /*host_server=*/true, 5000ms);
  std::vector<std::future<std::string>> threads;
  for (int r = 0; r < ranks; ++r)
    threads.push_back(std::async(std::launch::async, [&, r] {
      try {
        TcpStore store("127.0.0.1", port, /*host_server=*/false, 5000ms);
        body(r, store);
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    }));
  std::vector<std::string> errors;
  for (auto& thread : threads) errors.push_back(thread.get());
  return errors;
}

// Quarters: sums of three are exact in float, whatever the order.
float value(size_t i, int rank, int call) { return 0.25f * static_cast<float>((i * 7 + rank * 13 + call) % 101); }

std::unique_ptr<SharedMemoryAllReduce> connect(TcpStore& store, int rank, int ranks, bool enabled = true) {
  SharedMemoryAllReduce::Unavailable why_not;
  auto shm = SharedMemoryAllReduce::connect(store, rank, ranks, enabled, why_not);
  REQUIRE_MESSAGE(shm != nullptr, why_not.reason);
  return shm;
}

}  // namespace

TEST_CASE("shared-memory all-reduce: 3 ranks, several rounds, an odd count, every rank the same bits") {
  constexpr int kRanks = 3;
  const size_t n = SharedMemoryAllReduce::kChunkBytes / sizeof(float) * 2 + 1001;  // 2 full rounds and a short one
  std::vector<std::vector<float>> results(kRanks);
  const auto errors = on_threads(kRanks, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, kRanks);
    for (int call = 0; call < 2; ++call) {  // the rounds go on counting from one call to the next
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = value(i, rank, call);
      shm->all_reduce(data.data(), n, sizeof(float), add_floats, 5000ms);
      results[rank] = data;
    }
  });
  CHECK(errors == std::vector<std::string>(kRanks));
  for (size_t i = 0; i < n; i += 997) {
    CAPTURE(i);
    CHECK(results[0][i] == value(i, 0, 1) + value(i, 1, 1) + value(i, 2, 1));
  }
  CHECK(std::memcmp(results[0].data(), results[1].data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(results[0].data(), results[2].data(), n * sizeof(float)) == 0);
}

TEST_CASE("shared-memory broadcast: the root's bits reach every rank, over several rounds between all-reduces") {
  constexpr int kRanks = 3, kRoot = 1;
  const size_t n = SharedMemoryAllReduce::kChunkBytes / sizeof(float) + 777;  // a full round and a short one
  std::vector<std::vector<float>> results(kRanks);
  const auto errors = on_threads(kRanks, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, kRanks);
    std::vector<float> data(n);
    for (int call = 0; call < 2; ++call) {  // all-reduce, broadcast, all-reduce, broadcast: the rounds go on
      for (size_t i = 0; i < n; ++i) data[i] = value(i, rank, call);
      shm->all_reduce(data.data(), n, sizeof(float), add_floats, 5000ms);
      for (size_t i = 0; i < n; ++i) data[i] = value(i, rank, call + 7);
      shm->broadcast(data.data(), n * sizeof(float), kRoot, 5000ms);
    }
    results[rank] = data;
  });
  CHECK(errors == std::vector<std::string>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    CAPTURE(rank);
    bool all_roots = true;
    for (size_t i = 0; i < n; ++i) all_roots = all_roots && results[rank][i] == value(i, kRoot, 8);
    CHECK(all_roots);
  }
}

// Floats whose sums round differently in another order, so that only the same additions in the
// same order give the same bits.
float rough_value(size_t i, int rank, int call) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank) + static_cast<float>(call)) * 1e3f;
}

void divide_floats_by_3(void* data, size_t n) {
  for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] /= 3.0f;
}

TEST_CASE(
    "shared-memory all-reduce in place: a tensor in a shared buffer gets the bits of the path through the "
    "segments, divided once, over several calls") {
  constexpr int kRanks = 3;
  constexpr size_t kOffset = 5;  // the tensor starts inside the buffer, as a bucket's gradients do
  const size_t n = SharedMemoryAllReduce::kChunkBytes / sizeof(float) + 3001;  // more than a round
  std::vector<std::vector<float>> in_place(kRanks), through_segments(kRanks), last_inputs(kRanks);
  const auto errors = on_threads(kRanks, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, kRanks);
    std::string why_not;
    std::shared_ptr<char> buffer = shm->allocate_shared(store, (n + kOffset + 2) * sizeof(float), why_not);
    REQUIRE_MESSAGE(buffer != nullptr, why_not);
    float* shared = reinterpret_cast<float*>(buffer.get()) + kOffset;
    CHECK(shared[-kOffset] == 0.0f);  // fresh memory is zero
    std::vector<float> own(n);
    for (int call = 0; call < 3; ++call) {  // the buffer is reused: nobody may still read the last call's data
      for (size_t i = 0; i < n; ++i) shared[i] = own[i] = rough_value(i, rank, call);
      last_inputs[rank] = own;
      shm->all_reduce(shared, n, sizeof(float), add_floats, 5000ms, divide_floats_by_3);
      shm->all_reduce(own.data(), n, sizeof(float), add_floats, 5000ms, divide_floats_by_3);
    }
    in_place[rank].assign(shared, shared + n);
    through_segments[rank] = own;
  });
  CHECK(errors == std::vector<std::string>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    CAPTURE(rank);
    CHECK(std::memcmp(in_place[rank].data(), through_segments[0].data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(through_segments[rank].data(), through_segments[0].data(), n * sizeof(float)) == 0);
  }
  for (size_t i = 0; i < n; i += 4999) {
    CAPTURE(i);
    const float sum = (last_inputs[0][i] + last_inputs[1][i]) + last_inputs[2][i];
    CHECK(in_place[0][i] == sum / 3.0f);
  }
}

TEST_CASE(
    "shared-memory reduce-scatter and all-gather: 3 ranks, several rounds, each rank its chunk's sum, then "
    "every chunk") {
  constexpr int kRanks = 3;
  const size_t count = SharedMemoryAllReduce::kChunkBytes / sizeof(float) / kRanks * 2 + 333;  // 3 rounds
  std::vector<std::vector<float>> inputs(kRanks), scattered(kRanks), gathered(kRanks);
  const auto errors = on_threads(kRanks, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, kRanks);
    std::vector<float> input(kRanks * count), chunk(count), everyone(kRanks * count);
    for (size_t i = 0; i < input.size(); ++i) input[i] = rough_value(i, rank, 0);
    inputs[rank] = input;
    shm->reduce_scatter(input.data(), chunk.data(), count, sizeof(float), add_floats, 5000ms, divide_floats_by_3);
    shm->all_gather(chunk.data(), everyone.data(), count * sizeof(float), 5000ms);
    scattered[rank] = chunk;
    gathered[rank] = everyone;
  });
  CHECK(errors == std::vector<std::string>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    CAPTURE(rank);
    bool chunk_right = true, gathered_right = true;
    for (size_t i = 0; i < count; ++i) {
      const size_t at = static_cast<size_t>(rank) * count + i;
      chunk_right = chunk_right && scattered[rank][i] == ((inputs[0][at] + inputs[1][at]) + inputs[2][at]) / 3.0f;
    }
    for (size_t i = 0; i < kRanks * count; ++i)
      gathered_right = gathered_right && gathered[rank][i] == scattered[i / count][i % count];
    CHECK(chunk_right);
    CHECK(gathered_right);
  }
}

TEST_CASE(
    "shared-memory all-reduce in place: ranks that pass other places of a buffer, or one of their own, are "
    "told so") {
  const auto offsets = on_threads(2, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, 2);
    std::string why_not;
    std::shared_ptr<char> buffer = shm->allocate_shared(store, 64 * sizeof(float), why_not);
    REQUIRE(buffer != nullptr);
    float* data = reinterpret_cast<float*>(buffer.get()) + (rank == 0 ? 0 : 4);
    shm->all_reduce(data, 10, sizeof(float), add_floats, 2000ms);
  });
  CHECK(offsets[0] ==
        "rank 1 all-reduces a tensor in shared buffer 1 at byte 16, rank 0 in shared buffer 1 at byte 0: "
        "every rank must pass the same tensor of a shared buffer, or none");
  CHECK(offsets[1] ==
        "rank 0 all-reduces a tensor in shared buffer 1 at byte 0, rank 1 in shared buffer 1 at byte 16: "
        "every rank must pass the same tensor of a shared buffer, or none");
  const auto mixed = on_threads(2, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, 2);
    std::string why_not;
    std::shared_ptr<char> buffer = shm->allocate_shared(store, 64 * sizeof(float), why_not);
    REQUIRE(buffer != nullptr);
    std::vector<float> own(10, 1.0f);
    shm->all_reduce(rank == 0 ? reinterpret_cast<float*>(buffer.get()) : own.data(), 10, sizeof(float), add_floats,
                    2000ms);
  });
  CHECK(mixed[0] ==
        "rank 1 all-reduces a tensor in memory of its own, rank 0 in shared buffer 1 at byte 0: every "
        "rank must pass the same tensor of a shared buffer, or none");
}

TEST_CASE("shared-memory all-reduce: the segments have no name, and no descriptor of one stays open after setup") {
  std::vector<std::unique_ptr<SharedMemoryAllReduce>> connected(2);
  const auto errors = on_threads(2, [&](int rank, TcpStore& store) { connected[rank] = connect(store, rank, 2); });
  CHECK(errors == std::vector<std::string>(2));
  const auto is_shared_memory = [](const std::string& file) {
    return file.starts_with("/dev/shm/") || file.starts_with("/memfd:");
  };
  // Each rank maps both segments, and all four mappings are of anonymous memory (Note [Segments
  // with no name] in dist/shm_all_reduce.cpp), which the kernel frees with the last of them.
  std::vector<std::string> mapped;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (const size_t file = line.find('/'); file != std::string::npos && is_shared_memory(line.substr(file)))
      mapped.push_back(line.substr(file));
  CHECK(mapped == std::vector<std::string>(4, "/memfd:syncgrad-shm-all-reduce (deleted)"));
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    CHECK_FALSE(is_shared_memory(std::filesystem::read_symlink(entry.path(), error).string()));
  }
}

TEST_CASE("shared-memory all-reduce: one rank that cannot or will not join makes every rank fall back, saying why") {
  std::vector<SharedMemoryAllReduce::Unavailable> why_not(3);
  const auto errors = on_threads(3, [&](int rank, TcpStore& store) {
    auto shm = SharedMemoryAllReduce::connect(store, rank, 3, /*enabled=*/rank != 2, why_not[rank]);
    CHECK(shm == nullptr);
  });
  CHECK(errors == std::vector<std::string>(3));
  for (const SharedMemoryAllReduce::Unavailable& each : why_not) {
    CHECK(each.reason == "rank 2: it is turned off there (SG_SHM_ALLREDUCE=0)");
    CHECK_FALSE(each.is_failure);  // a choice: rank 0 says nothing about it
  }
}

TEST_CASE("shared-memory all-reduce: a rank that does not come, or brings another size, is an error naming it") {
  const auto late = on_threads(2, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, 2);
    std::vector<float> data(10, 1.0f);
    if (rank == 0) shm->all_reduce(data.data(), data.size(), sizeof(float), add_floats, 300ms);
  });
  CHECK(late[0] == "rank 1 did not arrive at the shared-memory all-reduce in time");
  CHECK(late[1].empty());
  const auto mismatch = on_threads(2, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, 2);
    std::vector<float> data(rank == 0 ? 10 : 12, 1.0f);
    shm->all_reduce(data.data(), data.size(), sizeof(float), add_floats, 2000ms);
  });
  CHECK(mismatch[0] == "rank 1 all-reduces 48 bytes, rank 0 40: every rank must pass the same shape and dtype");
  CHECK(mismatch[1] == "rank 0 all-reduces 40 bytes, rank 1 48: every rank must pass the same shape and dtype");
}

TEST_CASE("shared-memory collectives: ranks that call different ones of the same size are told which") {
  const auto errors = on_threads(2, [&](int rank, TcpStore& store) {
    auto shm = connect(store, rank, 2);
    std::vector<float> data(10, 1.0f);
    if (rank == 0) shm->all_reduce(data.data(), data.size(), sizeof(float), add_floats, 500ms);
    else shm->broadcast(data.data(), data.size() * sizeof(float), /*root=*/0, 500ms);
  });
  // Rank 1, not the root, waits for rank 0 to arrive and reads its header before it arrives
  // itself, so rank 1 is the one that says it; rank 0 then waits in vain for rank 1.
  CHECK(errors[1] == "rank 0 all-reduces, rank 1 broadcasts: every rank must call the same collective");
  CHECK(errors[0] == "rank 1 did not arrive at the shared-memory all-reduce in time");
}
