// dist::TcpStore in one process: the server (inside rank 0's store) and the clients run on
// threads and talk over loopback, so each behaviour is checked without starting processes.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "dist/collective_report.h"
#include "dist/tcp_store.h"
#include "dist_harness.h"
#include "launch/launcher.h"

using namespace sg;
using namespace sg::dist;
using namespace std::chrono_literals;

namespace {

// Short timeouts: a wait that should fail does so within the test's budget.
struct Store {
  explicit Store(const std::string& token = "", const TcpStoreLimits& limits = {})
      : server("127.0.0.1", port, /*host_server=*/true, 2000ms, token, limits),
        token(token) {}

  int port = find_free_port();
  TcpStore server;
  std::string token;

  std::unique_ptr<TcpStore> client(std::chrono::milliseconds timeout = 2000ms) const {
    return std::make_unique<TcpStore>("127.0.0.1", port, /*host_server=*/false, timeout, token);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

std::vector<char> bytes(const std::string& text) { return {text.begin(), text.end()}; }

// ---- talking to the store as a stranger would: raw bytes over a socket ----

// The store's commands, as Note [The store's wire format] in dist/store_protocol.h spells them.
constexpr uint8_t kSet = 1, kHello = 6;

int raw_connection(int port, const char* host = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host, &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_raw(int fd, const std::vector<char>& bytes) {
  CHECK(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// A command byte and a key with the length it claims (which may be a lie).
std::vector<char> message(uint8_t command, uint32_t claimed_length, const std::string& key = "") {
  std::vector<char> bytes(1 + sizeof claimed_length + key.size());
  bytes[0] = static_cast<char>(command);
  std::memcpy(bytes.data() + 1, &claimed_length, sizeof claimed_length);
  std::memcpy(bytes.data() + 1 + sizeof claimed_length, key.data(), key.size());
  return bytes;
}

// Says HELLO with `token` and returns the store's answer (1 welcome, 0 refused, -1 hung up).
int greet(int fd, const std::string& token = "") {
  send_raw(fd, message(kHello, static_cast<uint32_t>(token.size()), token));
  char answer = 0;
  return ::recv(fd, &answer, 1, 0) == 1 ? answer : -1;
}

// Whether the store closes `fd` within `timeout` (reading and dropping whatever it answers).
bool closed_by_store(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd polled{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&polled, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[256];
    if (::recv(fd, buffer, sizeof buffer, 0) <= 0) return true;
  }
}

// This process's resident memory, open descriptors and threads, from /proc.
int64_t resident_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6)) / 1024;
  return -1;
}
int64_t entries_in(const char* directory) {
  return std::distance(std::filesystem::directory_iterator(directory), std::filesystem::directory_iterator());
}

// Waits until `count()` is at most `limit`; false at the deadline.
template <typename Count>
bool drops_to(Count count, int64_t limit, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (count() > limit) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

}  // namespace

TEST_CASE("a value set by one client is read by another with every byte intact") {
  Store store;
  auto client = store.client();
  std::mt19937 random(7);
  std::vector<char> large(3 << 20);  // several MB: the socket delivers it in many pieces
  for (char& c : large) c = static_cast<char>(random());
  const std::vector<char> awkward{'a', '\0', '\xff', '\n', 'z'};

  store.server.set("large", large);
  client->set("awkward", awkward);
  client->set("empty", {});
  CHECK(client->get("large") == large);
  CHECK(store.server.get("awkward") == awkward);
  CHECK(store.server.get("empty").empty());
  client->set("awkward", bytes("replaced"));
  CHECK(store.server.get("awkward") == bytes("replaced"));
}

TEST_CASE("get blocks until another client sets the key") {
  Store store;
  auto reader = store.client();
  auto value = std::async(std::launch::async, [&] { return reader->get("late"); });
  CHECK(value.wait_for(100ms) == std::future_status::timeout);  // still waiting
  store.server.set("late", bytes("here"));
  CHECK(value.get() == bytes("here"));
}

TEST_CASE("get of a key that never comes fails at the timeout, naming the key and the address") {
  Store store;
  auto client = store.client(200ms);
  const auto start = std::chrono::steady_clock::now();
  try {
    client->get("missing/key");
    FAIL("get returned a key nobody set");
  } catch (const Error& error) {
    CHECK(test::contains(error.what(), "'missing/key'"));
    CHECK(test::contains(error.what(), store.address()));
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 200ms);
  CHECK(waited < 1500ms);
}

TEST_CASE("add is atomic across concurrent clients") {
  Store store;
  std::vector<std::future<std::vector<int64_t>>> adders;
  for (int delta = 1; delta <= 4; ++delta)
    adders.push_back(std::async(std::launch::async, [&, delta] {
      auto client = store.client();
      std::vector<int64_t> totals;
      for (int i = 0; i < 100; ++i) totals.push_back(client->add("counter", delta));
      return totals;
    }));
  std::set<int64_t> seen;
  for (auto& adder : adders)
    for (int64_t total : adder.get()) seen.insert(total);
  CHECK(seen.size() == 400);      // every add saw a different total: none overlapped another
  CHECK(*seen.rbegin() == 1000);  // 100 * (1 + 2 + 3 + 4)
  CHECK(store.server.add("counter", 0) == 1000);
  CHECK(store.server.get("counter") == bytes("1000"));  // counters are decimal text, readable by get
  CHECK(store.server.add("counter", -1001) == -1);
}

TEST_CASE("add on a key that holds something other than a number is an error naming the key") {
  Store store;
  store.server.set("word", bytes("hello"));
  CHECK_THROWS_WITH_AS(store.server.add("word", 1), doctest::Contains("add on key 'word'"), Error);
  CHECK(store.server.get("word") == bytes("hello"));  // left as it was
  CHECK(store.server.add("other", 2) == 2);           // and the server survived it
}

TEST_CASE("check says whether every key exists, and wait returns once they all do") {
  Store store;
  auto client = store.client();
  store.server.set("a", bytes("1"));
  CHECK(client->check({"a"}));
  CHECK_FALSE(client->check({"a", "b"}));
  CHECK_FALSE(client->check({"b"}));
  auto waiter = std::async(std::launch::async, [&] { client->wait({"a", "b", "c"}); });
  store.server.set("b", bytes("2"));
  CHECK(waiter.wait_for(100ms) == std::future_status::timeout);  // "c" is still missing
  store.server.set("c", bytes("3"));
  waiter.get();  // returns without throwing
  CHECK(client->check({"a", "b", "c"}));
}

TEST_CASE("wait with a timeout fails naming the first missing key and the address") {
  Store store;
  auto client = store.client();
  store.server.set("present", bytes("1"));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(client->wait({"present", "absent"}, 200ms),
                       doctest::Contains(("key 'absent' did not appear in the store at " + store.address()).c_str()),
                       Error);
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);
}

TEST_CASE("when a registered rank's connection closes, the store marks it departed") {
  Store store;
  store.server.register_rank(0);
  auto rank1 = store.client();
  rank1->register_rank(1);
  auto unregistered = store.client();
  CHECK_FALSE(store.server.check({"departed/1"}));
  unregistered.reset();
  rank1.reset();  // as when its process ends, however it ends
  store.server.wait({"departed/1"}, 1000ms);
  CHECK_FALSE(store.server.check({"departed/0"}));  // still connected
}

TEST_CASE("destroying the server while a client is blocked in get ends the get with an error, not a hang") {
  auto store = std::make_unique<Store>();
  auto client = store->client(60000ms);
  auto reader = std::async(std::launch::async, [&] { client->get("never"); });
  CHECK(reader.wait_for(100ms) == std::future_status::timeout);  // blocked in get
  const auto start = std::chrono::steady_clock::now();
  store.reset();
  CHECK_THROWS_WITH_AS(reader.get(), doctest::Contains("lost the connection to the store"), Error);
  CHECK(std::chrono::steady_clock::now() - start < 2000ms);
  CHECK_THROWS_WITH_AS(client->set("after", bytes("x")), doctest::Contains("lost the connection"), Error);
}

TEST_CASE("connecting to a port nobody serves fails within the timeout, naming the address") {
  const int port = find_free_port();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(
      TcpStore("127.0.0.1", port, /*host_server=*/false, 300ms),
      doctest::Contains(("could not connect to the store of rank 0 at 127.0.0.1:" + std::to_string(port)).c_str()),
      Error);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 300ms);  // it kept retrying: rank 0 may simply start late
  CHECK(waited < 1500ms);
  // A host name may resolve to loopback on rank 0's machine, where the store then listens: the
  // message asks about it (not for a numeric address, above).
  CHECK_THROWS_WITH_AS(TcpStore("localhost", port, /*host_server=*/false, 100ms),
                       doctest::Contains("On rank 0's machine, does 'localhost' resolve to the address this machine "
                                         "reaches it at? The store listens only there (Debian and Ubuntu map a "
                                         "machine's own name to 127.0.1.1)"),
                       Error);
}

TEST_CASE("a second server on a port already served is an error that suggests another port") {
  Store store;
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", store.port, /*host_server=*/true, 300ms),
                       doctest::Contains(("cannot serve the store on port " + std::to_string(store.port)).c_str()),
                       Error);
}

// ---- a store that faces the network (Note [The store faces the network]) ----

TEST_CASE("a request that claims a 4 GB key or value is refused before anything is allocated") {
  Store store;
  const int64_t resident_before = resident_mb();
  const int huge_key = raw_connection(store.port);
  REQUIRE(greet(huge_key) == 1);
  send_raw(huge_key, message(kSet, 0xFFFFFFFFu));  // 5 bytes that used to pin 4 GB
  CHECK(closed_by_store(huge_key, 1000ms));
  const int huge_value = raw_connection(store.port);
  REQUIRE(greet(huge_value) == 1);
  std::vector<char> request = message(kSet, 1, "k");
  const uint32_t claimed = 0xFFFFFFFFu;
  request.insert(request.end(), reinterpret_cast<const char*>(&claimed), reinterpret_cast<const char*>(&claimed) + 4);
  send_raw(huge_value, request);
  CHECK(closed_by_store(huge_value, 1000ms));
  CHECK(resident_mb() - resident_before < 100);
  ::close(huge_key);
  ::close(huge_value);
  store.server.set("still", bytes("serving"));  // and the store carries on
  CHECK(store.client()->get("still") == bytes("serving"));
}

TEST_CASE("connections that send random bytes are closed without growing the store") {
  Store store;
  const int64_t resident_before = resident_mb();
  std::mt19937 random(11);
  std::vector<int> strangers;
  for (int i = 0; i < 20; ++i) {
    std::vector<char> noise(64 << 10);
    for (char& c : noise) c = static_cast<char>(random());
    const int fd = raw_connection(store.port);
    REQUIRE(fd >= 0);
    ::send(fd, noise.data(), noise.size(), MSG_NOSIGNAL);  // may fail part-way once the store hangs up
    strangers.push_back(fd);
  }
  for (const int fd : strangers) {
    CHECK(closed_by_store(fd, 2000ms));
    ::close(fd);
  }
  CHECK(resident_mb() - resident_before < 64);
  CHECK(store.server.add("counter", 1) == 1);
}

TEST_CASE("a store with a token refuses a client with another token, and says which variable to set") {
  Store store("job-secret");
  CHECK(store.client()->add("joined", 1) == 1);  // the right token
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", store.port, /*host_server=*/false, 500ms, "guess"),
                       doctest::Contains("refused this process's SG_STORE_TOKEN"), Error);
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", store.port, /*host_server=*/false, 500ms),
                       doctest::Contains("refused this process's SG_STORE_TOKEN"), Error);
  const int skipping_hello = raw_connection(store.port);
  send_raw(skipping_hello, message(kSet, 1, "k"));
  CHECK(closed_by_store(skipping_hello, 1000ms));
  ::close(skipping_hello);
  CHECK_FALSE(store.server.check({"k"}));
}

TEST_CASE("a connection that never says hello is closed after the handshake timeout") {
  TcpStoreLimits limits;
  limits.handshake_timeout = 200ms;
  Store store("", limits);
  const int silent = raw_connection(store.port);
  const auto start = std::chrono::steady_clock::now();
  CHECK(closed_by_store(silent, 3000ms));
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  ::close(silent);
}

TEST_CASE("connect and close cycles leave no descriptors or threads behind") {
  Store store;
  const int64_t descriptors = entries_in("/proc/self/fd"), threads = entries_in("/proc/self/task");
  for (int i = 0; i < 300; ++i) {
    const int fd = raw_connection(store.port);
    REQUIRE(fd >= 0);
    if (i % 2 == 0) CHECK(greet(fd) == 1);  // half of them say hello first
    ::close(fd);
  }
  for (int i = 0; i < 20; ++i) store.client()->set("k", bytes("v"));
  // The store closes each connection when its client hangs up and reaps its thread within a second.
  CHECK(drops_to([] { return entries_in("/proc/self/fd"); }, descriptors, 3000ms));
  CHECK(drops_to([] { return entries_in("/proc/self/task"); }, threads, 3000ms));
}

TEST_CASE("connections over the limit are closed at once while those already open keep working") {
  TcpStoreLimits limits;
  limits.max_connections = 3;  // the server's own client is the first
  Store store("", limits);
  auto rank1 = store.client();
  const int third = raw_connection(store.port);
  REQUIRE(greet(third) == 1);
  const int fourth = raw_connection(store.port);
  CHECK(closed_by_store(fourth, 1000ms));
  ::close(fourth);
  CHECK_THROWS_WITH_AS(store.client(300ms), doctest::Contains("too many connections"), Error);
  rank1->set("a", bytes("1"));  // the connections that were in keep working
  CHECK(store.server.get("a") == bytes("1"));
  ::close(third);
  CHECK(store.client(2000ms)->get("a") == bytes("1"));  // a freed place is taken again
}

TEST_CASE("the store listens only on the address it was given") {
  const int port = find_free_port();
  TcpStore server("127.0.0.2", port, /*host_server=*/true, 2000ms);  // all of 127/8 is this machine's loopback
  CHECK(raw_connection(port, "127.0.0.1") < 0);
  const int fd = raw_connection(port, "127.0.0.2");
  CHECK(fd >= 0);
  ::close(fd);
}

TEST_CASE("a store that stops answering fails every call within the timeout instead of hanging") {
  // A frozen rank 0 (SIGSTOP) accepts bytes into its socket buffers and never answers; this
  // server does the same after the handshake.
  const int port = find_free_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  std::atomic<int> accepted{-1};
  std::thread frozen([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    char hello[5];
    ::recv(fd, hello, sizeof hello, MSG_WAITALL);  // HELLO with an empty token
    ::send(fd, "\x01", 1, MSG_NOSIGNAL);
    accepted = fd;
  });
  TcpStore client("127.0.0.1", port, /*host_server=*/false, 300ms);
  frozen.join();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(client.set("started/1", bytes("7")), doctest::Contains("did not answer within 300 ms"), Error);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 300ms);
  CHECK(waited < 1500ms);
  CHECK_THROWS_WITH_AS(client.get("x"), doctest::Contains("is unusable"), Error);
  ::close(accepted);
  ::close(listener);
}

TEST_CASE("add that would overflow is an error and leaves the counter as it was") {
  Store store;
  CHECK(store.server.add("n", std::numeric_limits<int64_t>::max()) == std::numeric_limits<int64_t>::max());
  CHECK_THROWS_WITH_AS(store.server.add("n", 1), doctest::Contains("would overflow"), Error);
  CHECK(store.server.add("n", -1) == std::numeric_limits<int64_t>::max() - 1);
}

TEST_CASE("keys and values over the limits are refused by the client, naming the sizes") {
  TcpStoreLimits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 32;
  limits.max_held_bytes = 1000;
  Store store("", limits);
  CHECK_THROWS_WITH_AS(store.server.set(std::string(17, 'k'), bytes("v")), doctest::Contains("17 bytes long"), Error);
  CHECK_THROWS_WITH_AS(store.server.set("k", std::vector<char>(33)), doctest::Contains("is 33 bytes"), Error);
  // What the store holds is bounded too: 64 bytes of bookkeeping + key + value per entry.
  int stored = 0;
  try {
    for (; stored < 100; ++stored) store.server.set("key" + std::to_string(stored), std::vector<char>(32));
  } catch (const Error& error) {
    CHECK(test::contains(error.what(), "already holds its limit of 1000 bytes"));
  }
  CHECK(stored >= 5);
  CHECK(stored < 12);
  store.server.set("key0", std::vector<char>(8));  // replacing a value frees what it held
  CHECK(store.server.get("key0").size() == 8);
}

// Note [Marks that do not wait] in dist/tcp_store.cpp.
TEST_CASE("set_without_waiting is seen by every later request, and its answer is read by the next one") {
  Store store;
  auto client = store.client();
  // Many in a row: each reads the answer of the one before, so none pile up in the socket.
  for (int i = 0; i < 20000; ++i) client->set_without_waiting("started/1", bytes(std::to_string(i)));
  CHECK(store.server.get("started/1") == bytes("19999"));  // another connection: the server took them in order
  CHECK(client->get("started/1") == bytes("19999"));
  client->set_without_waiting("mark", bytes("m"));
  CHECK(client->add("counter", 3) == 3);  // the next request of any kind collects the answer first
  CHECK(store.server.get("mark") == bytes("m"));
}

TEST_CASE("a set_without_waiting the store refuses is an error at the next request, naming the key") {
  TcpStoreLimits limits;
  limits.max_held_bytes = 1000;
  Store store("", limits);
  auto client = store.client();
  client->set("big", std::vector<char>(800, 'x'));
  client->set_without_waiting("other", std::vector<char>(800, 'y'));  // sent; the refusal is still unread
  CHECK_THROWS_WITH_AS(client->check({"big"}), doctest::Contains("refused key 'other': it already holds its limit of"),
                       Error);
  CHECK(client->check({"big"}));  // the connection works on
  CHECK_FALSE(client->check({"other"}));
}

TEST_CASE("delete_key removes a key and frees its bytes for new ones") {
  TcpStoreLimits limits;
  limits.max_held_bytes = 1000;
  Store store("", limits);
  auto client = store.client();
  client->set("big", std::vector<char>(800, 'x'));
  CHECK_THROWS_WITH_AS(client->set("other", std::vector<char>(800, 'y')),
                       doctest::Contains("refused key 'other': it already holds its limit of"), Error);
  CHECK(store.server.delete_key("big"));
  CHECK_FALSE(client->check({"big"}));
  CHECK_FALSE(client->delete_key("big"));  // gone already
  client->set("other", std::vector<char>(800, 'y'));
  CHECK(client->get("other") == std::vector<char>(800, 'y'));
  CHECK(client->add("counter", 2) == 2);  // counters are keys like any other
  CHECK(client->delete_key("counter"));
  CHECK(client->add("counter", 5) == 5);
}

TEST_CASE(
    "SG_DIST_DEBUG fingerprints through the store: keys two collectives old are deleted, and a mismatch is "
    "named on every rank") {
  // What the NCCL group does before each collective; here three ranks on threads.
  constexpr int kRanks = 3, kCollectives = 12;
  Store store;
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int r = 0; r < kRanks; ++r) clients.push_back(store.client());
  const CollectiveDescription all_reduce{CollectiveOp::all_reduce, 0, 0, -1, Shape{10}};
  const CollectiveDescription broadcast{CollectiveOp::broadcast, -1, 0, 0, Shape{10}};
  const auto run_ranks = [&](int64_t first, int64_t last, const CollectiveDescription& rank1_calls) {
    std::vector<std::future<std::string>> ranks;
    for (int r = 0; r < kRanks; ++r)
      ranks.push_back(std::async(std::launch::async, [&, r] {
        try {
          for (int64_t sequence = first; sequence <= last; ++sequence)
            check_fingerprints_through_store(*clients[r], "fp", r, kRanks, sequence,
                                             r == 1 && sequence == last ? rank1_calls : all_reduce);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }));
    std::vector<std::string> errors;
    for (auto& rank : ranks) errors.push_back(rank.get());
    return errors;
  };
  CHECK(run_ranks(0, kCollectives - 1, all_reduce) == std::vector<std::string>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    CAPTURE(r);
    for (int sequence = 0; sequence < kCollectives; ++sequence)
      CHECK(store.server.check({"fp/" + std::to_string(sequence) + "/" + std::to_string(r)}) ==
            (sequence >= kCollectives - 2));
  }
  const std::vector<std::string> errors = run_ranks(kCollectives, kCollectives, broadcast);
  for (const std::string& error : errors)
    CHECK(error.find("SG_DIST_DEBUG: the ranks disagree on collective #12: rank 0 called all_reduce") !=
          std::string::npos);
  CHECK(errors[0].find("but rank 1 called broadcast") != std::string::npos);
}
