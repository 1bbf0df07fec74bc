// dist::TcpStore in one process: the server (inside rank 0's store) and the clients run on
// threads and talk over loopback, so each behaviour is checked without starting processes.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "dist/launcher.h"
#include "dist/tcp_store.h"

using namespace sg;
using namespace sg::dist;
using namespace std::chrono_literals;

namespace {

// Short timeouts: a wait that should fail does so within the test's budget.
struct Store {
  int port = find_free_port();
  TcpStore server{"127.0.0.1", port, /*host_server=*/true, 2000ms};

  std::unique_ptr<TcpStore> client(std::chrono::milliseconds timeout = 2000ms) const {
    return std::make_unique<TcpStore>("127.0.0.1", port, /*host_server=*/false, timeout);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

std::vector<char> bytes(const std::string& text) { return {text.begin(), text.end()}; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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
    CHECK(contains(error.what(), "'missing/key'"));
    CHECK(contains(error.what(), store.address()));
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
  CHECK(seen.size() == 400);  // every add saw a different total: none overlapped another
  CHECK(*seen.rbegin() == 1000);  // 100 * (1 + 2 + 3 + 4)
  CHECK(store.server.add("counter", 0) == 1000);
  CHECK(store.server.get("counter") == bytes("1000"));  // counters are decimal text, readable by get
  CHECK(store.server.add("counter", -1001) == -1);
}

TEST_CASE("add on a key that holds something other than a number is an error naming the key") {
  Store store;
  store.server.set("word", bytes("hello"));
  CHECK_THROWS_WITH_AS(store.server.add("word", 1), doctest::Contains("add on key 'word'"),
                       Error);
  CHECK(store.server.get("word") == bytes("hello"));  // left as it was
  CHECK(store.server.add("other", 2) == 2);            // and the server survived it
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
                       doctest::Contains(("key 'absent' did not appear in the store at " + store.address()).c_str()), Error);
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
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", port, /*host_server=*/false, 300ms),
                       doctest::Contains(("could not connect to the store of rank 0 at 127.0.0.1:" + std::to_string(port)).c_str()),
                       Error);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 300ms);  // it kept retrying: rank 0 may simply start late
  CHECK(waited < 1500ms);
}

TEST_CASE("a second server on a port already served is an error that suggests another port") {
  Store store;
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", store.port, /*host_server=*/true, 300ms),
                       doctest::Contains(("cannot serve the store on port " + std::to_string(store.port)).c_str()), Error);
}
