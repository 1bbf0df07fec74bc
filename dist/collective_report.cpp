#include "dist/collective_report.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"

namespace sg::dist {

namespace {
constexpr const char* kOpNames[] = {"all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "barrier"};
}  // namespace

std::string CollectiveDescription::str(int64_t sequence) const {
  std::ostringstream out;
  out << kOpNames[static_cast<int>(op)];
  if (reduce_op >= 0) out << "(" << reduce_op_name(static_cast<ReduceOp>(reduce_op)) << ")";
  if (root >= 0) out << "(root " << root << ")";
  out << " #" << sequence;
  if (dtype >= 0) {
    const DType type = static_cast<DType>(dtype);
    out << " on " << type << shape_str(shape) << " (" << numel_of(shape) * static_cast<int64_t>(itemsize(type))
        << " bytes)";
  }
  return out.str();
}

void mark_started(TcpStore& store, int rank, int64_t sequence) {
  const std::string started = std::to_string(sequence);
  store.set("started/" + std::to_string(rank), std::vector<char>(started.begin(), started.end()));
}

// Each surviving rank whose collective failed leaves a "failed" mark; the store marks a rank
// whose connection closed as departed (Note [Departure marks] in tcp_store.cpp). A rank with
// neither within a second is alive but busy elsewhere: stuck in computation or data loading, or
// waiting in a different collective.
std::string diagnose_failure(TcpStore& store, int rank, int size, int64_t sequence) {
  try {
    const std::string mark = std::to_string(sequence);
    store.set("failed/" + mark + "/" + std::to_string(rank), {'1'});
    std::vector<int> behind, pending;
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      pending.push_back(r);
      const std::string started_key = "started/" + std::to_string(r);
      int64_t started = -1;
      if (store.check({started_key})) {
        const auto value = store.get(started_key);
        started = std::stoll(std::string(value.begin(), value.end()));
      }
      if (started < sequence) behind.push_back(r);
    }
    // A dying process closes its sockets one by one, so the store may learn of it a little after
    // the collective did: look again every 20 ms.
    std::vector<int> departed;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
      std::erase_if(pending, [&](int r) {
        if (store.check({"failed/" + mark + "/" + std::to_string(r)})) return true;
        if (!store.check({"departed/" + std::to_string(r)})) return false;
        departed.push_back(r);
        return true;
      });
      if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto list = [](std::vector<int> ranks) {
      std::sort(ranks.begin(), ranks.end());
      std::ostringstream out;
      for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
      return out.str();
    };
    std::ostringstream report;
    if (!behind.empty()) report << "rank(s) " << list(behind) << " never reached collective #" << sequence << ". ";
    if (!departed.empty()) report << "rank(s) " << list(departed) << " exited (their connection to the store closed). ";
    if (!pending.empty())
      report << "rank(s) " << list(pending) << " are still running but did not fail with it: stuck elsewhere "
             << "(computation, data loading, or a different collective).";
    if (behind.empty() && departed.empty() && pending.empty())
      report << "every rank reached collective #" << sequence << " and is alive: check that all ranks issue the same "
             << "collectives with the same shapes (SG_DIST_DEBUG=1 checks it).";
    std::string text = report.str();
    if (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
  } catch (const std::exception& e) {
    return std::string("could not ask the store which ranks arrived (") + e.what() +
           "); rank 0, which hosts it, has probably exited or crashed.";
  }
}

}  // namespace sg::dist
