#include "dist/collective_report.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"

namespace sg::dist {

namespace {
constexpr const char* kOpNames[] = {"all_reduce",
                                    "broadcast",
                                    "reduce",
                                    "all_gather",
                                    "gather",
                                    "scatter",
                                    "barrier",
                                    "reduce_scatter_tensor",
                                    "all_gather_into_tensor"};
}  // namespace

const char* CollectiveDescription::op_name() const { return kOpNames[static_cast<int>(op)]; }

int64_t CollectiveDescription::bytes() const {
  return dtype >= 0 ? numel_of(shape) * static_cast<int64_t>(itemsize(static_cast<DType>(dtype))) : 0;
}

std::string CollectiveDescription::str(int64_t sequence) const {
  std::ostringstream out;
  out << op_name();
  if (reduce_op >= 0) out << "(" << reduce_op_name(static_cast<ReduceOp>(reduce_op)) << ")";
  if (root >= 0) out << "(root " << root << ")";
  out << " #" << sequence;
  if (dtype >= 0) out << " on " << static_cast<DType>(dtype) << shape_str(shape) << " (" << bytes() << " bytes)";
  return out.str();
}

void mark_started(TcpStore& store, int rank, int64_t sequence) {
  const std::string started = std::to_string(sequence);
  // Not waiting for the store's answer (Note [Marks that do not wait] in dist/tcp_store.cpp).
  store.set_without_waiting("started/" + std::to_string(rank), std::vector<char>(started.begin(), started.end()));
}

// Each surviving rank whose collective failed leaves a "failed" mark; the store marks a rank
// whose connection closed as departed (Note [Departure marks] in tcp_store_server.cpp). A rank with
// neither within a second still has its connection open as far as the store knows: it is busy
// elsewhere (computation, data loading, a different collective), frozen (SIGSTOP, a debugger), or
// its link went down — TCP reports no close when a cable is pulled, so the store cannot tell these
// apart.
namespace {
constexpr int kFingerprintDims = kFingerprintFields - 6;
}  // namespace

std::vector<int64_t> fingerprint(int64_t sequence, const CollectiveDescription& description) {
  std::vector<int64_t> fields(kFingerprintFields, -1);
  fields[0] = sequence;
  fields[1] = static_cast<int64_t>(description.op);
  fields[2] = description.reduce_op;
  fields[3] = description.dtype;
  fields[4] = description.root;
  fields[5] = static_cast<int64_t>(description.shape.size());
  for (size_t d = 0; d < description.shape.size() && d < kFingerprintDims; ++d) fields[6 + d] = description.shape[d];
  return fields;
}

void check_fingerprints(const std::vector<int64_t>& all, int size, int64_t sequence) {
  const auto describe = [&](int r) {
    const int64_t* f = all.data() + r * kFingerprintFields;
    CollectiveDescription d{
        static_cast<CollectiveOp>(f[1]), static_cast<int>(f[2]), static_cast<int>(f[3]), static_cast<int>(f[4]), {}};
    for (int64_t i = 0; i < std::min<int64_t>(f[5], kFingerprintDims); ++i) d.shape.push_back(f[6 + i]);
    return d.str(f[0]);
  };
  for (int r = 1; r < size; ++r)
    SG_CHECK(std::equal(all.begin(), all.begin() + kFingerprintFields, all.begin() + r * kFingerprintFields),
             "SG_DIST_DEBUG: the ranks disagree on collective #", sequence, ": rank 0 called ", describe(0),
             " but rank ", r, " called ", describe(r),
             ". Every rank must issue the same collectives in the same order with the same shapes.");
}

void check_fingerprints_through_store(TcpStore& store, const std::string& prefix, int rank, int size, int64_t sequence,
                                      const CollectiveDescription& description) {
  const auto key_of = [&](int64_t of_sequence, int r) {
    return prefix + "/" + std::to_string(of_sequence) + "/" + std::to_string(r);
  };
  const std::vector<int64_t> mine = fingerprint(sequence, description);
  const auto* mine_bytes = reinterpret_cast<const char*>(mine.data());
  store.set(key_of(sequence, rank), std::vector<char>(mine_bytes, mine_bytes + mine.size() * sizeof(int64_t)));
  std::vector<int64_t> all(static_cast<size_t>(kFingerprintFields * size));
  for (int r = 0; r < size; ++r) {
    const std::vector<char> bytes = store.get(key_of(sequence, r));
    SG_CHECK(bytes.size() == kFingerprintFields * sizeof(int64_t), "SG_DIST_DEBUG: the fingerprint of rank ", r,
             " for collective #", sequence, " has ", bytes.size(), " bytes");
    std::memcpy(all.data() + r * kFingerprintFields, bytes.data(), bytes.size());
  }
  // This rank has read every key of collective sequence - 1, so every rank has set its key of it,
  // which it does only after reading all of sequence - 2: nobody reads those keys again.
  if (sequence >= 2) store.delete_key(key_of(sequence - 2, rank));
  check_fingerprints(all, size, sequence);
}

std::string diagnose_failure(TcpStore& store, int rank, int size, int64_t sequence,
                             const std::function<int64_t(int)>& started_of) {
  try {
    const std::string mark = std::to_string(sequence);
    store.set("failed/" + mark + "/" + std::to_string(rank), {'1'});
    std::vector<int> behind, ahead, pending;
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      pending.push_back(r);
      const std::string started_key = "started/" + std::to_string(r);
      int64_t started = -1;
      if (started_of) {
        started = started_of(r);
      } else if (store.check({started_key})) {
        const auto value = store.get(started_key);
        started = std::stoll(std::string(value.begin(), value.end()));
      }
      if (started < sequence) behind.push_back(r);
      if (started > sequence) ahead.push_back(r);
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
    // A rank whose part of a collective ended early (a broadcast's receiver once it has the data)
    // goes on to the next one and waits there: it is not lost, and saying so points at the others.
    std::vector<int> went_on;
    std::erase_if(pending, [&](int r) {
      if (std::find(ahead.begin(), ahead.end(), r) == ahead.end()) return false;
      went_on.push_back(r);
      return true;
    });
    if (!went_on.empty())
      report << "rank(s) " << list(went_on) << " finished their part of collective #" << sequence
             << " and went on to a later one. ";
    if (!pending.empty())
      report << "rank(s) " << list(pending) << " still hold their store connection but did not fail with it: "
             << "stuck elsewhere (computation, data loading, or a different collective), frozen, or cut off by the "
             << "network.";
    if (behind.empty() && departed.empty() && pending.empty())
      report << "every rank reached collective #" << sequence << " and is alive: check that all ranks issue the same "
             << "collectives with the same shapes (SG_DIST_DEBUG=1 checks it).";
    std::string text = report.str();
    if (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
  } catch (const std::exception& e) {
    return std::string("could not ask the store which ranks arrived: ") + e.what();
  }
}

}  // namespace sg::dist
