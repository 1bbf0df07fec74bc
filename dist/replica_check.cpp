#include "dist/replica_check.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>

#include <xxhash.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "dist/exchange.h"
#include "dist/run_fingerprint.h"

namespace sg::dist {

namespace {

std::string hex(uint64_t hash) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016" PRIx64, hash);
  return text;
}

// Per rank, the hash of each group: one row of the first exchange.
using GroupHashes = std::vector<uint64_t>;

std::vector<GroupHashes> all_gather_hashes(ProcessGroup& group, const GroupHashes& mine) {
  const auto count = static_cast<int64_t>(mine.size());
  Tensor words = empty({count}, {DType::i64});
  std::memcpy(words.data_ptr<int64_t>(), mine.data(), mine.size() * sizeof(uint64_t));
  words = words.to(group.device());
  std::vector<Tensor> gathered;
  for (int r = 0; r < group.size(); ++r) gathered.push_back(empty({count}, {DType::i64, group.device()}));
  group.all_gather(gathered, words)->wait();
  std::vector<GroupHashes> per_rank;
  for (const Tensor& row : gathered) {
    const Tensor on_host = row.to(Device::cpu());
    GroupHashes hashes(mine.size());
    std::memcpy(hashes.data(), on_host.data_ptr<int64_t>(), hashes.size() * sizeof(uint64_t));
    per_rank.push_back(std::move(hashes));
  }
  return per_rank;
}

// One entry per line, "<hash> <name>" (names hold spaces: "optimizer state exp_avg of ...").
std::string describe_entries(const nn::NamedTensors& entries, const std::vector<uint64_t>& hashes) {
  std::string text;
  for (size_t i = 0; i < entries.size(); ++i) text += hex(hashes[i]) + " " + entries[i].first + "\n";
  return text;
}

struct Entry {
  std::string name;
  std::vector<std::optional<std::string>> hash_per_rank;  // nullopt: the rank has no such tensor
};

// Every rank's entries, in rank 0's order, then the names only other ranks have.
std::vector<Entry> entries_by_name(const std::vector<std::string>& texts) {
  std::vector<Entry> entries;
  for (size_t rank = 0; rank < texts.size(); ++rank) {
    std::istringstream lines(texts[rank]);
    for (std::string line; std::getline(lines, line);) {
      const size_t space = line.find(' ');
      const std::string hash = line.substr(0, space), name = line.substr(space + 1);
      auto entry = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; });
      if (entry == entries.end())
        entry = entries.insert(entries.end(), {name, std::vector<std::optional<std::string>>(texts.size())});
      entry->hash_per_rank[rank] = hash;
    }
  }
  return entries;
}

// "rank 0 holds 0x..., rank 1 differs with 0x...", "ranks 0, 2 agree on 0x..., rank 1 differs with 0x...".
std::string who_holds_what(const std::vector<std::optional<std::string>>& hash_per_rank) {
  const auto groups = ranks_by_value(hash_per_rank);
  std::string text;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [hash, ranks] = groups[g];
    const bool several = ranks.size() > 1;
    text += (g > 0 ? ", " : "") + ranks_named(ranks);
    if (!hash.has_value()) text += several ? " have no such tensor" : " has no such tensor";
    else if (g == 0) text += (several ? " agree on " : " holds ") + *hash;
    else text += (several ? " differ with " : " differs with ") + *hash;
  }
  return text;
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t size) { return XXH64(data, size, 0); }

uint64_t hash_bits(const Tensor& tensor) {
  NoGradGuard no_grad;  // a parameter's copy to the host or contiguous() is no part of any graph
  const Tensor host = tensor.to(Device::cpu()).contiguous();
  return hash_bytes(host.raw_data(), static_cast<size_t>(host.numel()) * host.element_size());
}

void check_replicas_agree(ProcessGroup& group, const std::vector<nn::NamedTensors>& groups, const std::string& where) {
  if (group.size() == 1) return;
  std::vector<std::vector<uint64_t>> tensor_hashes;  // per group, per tensor
  GroupHashes group_hashes;
  for (const nn::NamedTensors& tensors : groups) {
    std::vector<uint64_t>& hashes = tensor_hashes.emplace_back();
    for (const auto& [name, tensor] : tensors) hashes.push_back(hash_bits(tensor));
    group_hashes.push_back(hash_bytes(hashes.data(), hashes.size() * sizeof(uint64_t)));
  }
  const std::vector<GroupHashes> per_rank = all_gather_hashes(group, group_hashes);
  // Every rank gathered the same rows, so every rank takes the same branches from here on.
  std::string differing_groups;  // this rank's entries of the groups that differ somewhere
  for (size_t g = 0; g < groups.size(); ++g)
    for (const GroupHashes& theirs : per_rank)
      if (theirs[g] != per_rank[0][g]) {
        differing_groups += describe_entries(groups[g], tensor_hashes[g]);
        break;
      }
  if (differing_groups.empty()) return;

  std::vector<const Entry*> differing;
  const std::vector<Entry> entries = entries_by_name(all_gather_strings(group, differing_groups));
  for (const Entry& entry : entries)
    if (ranks_by_value(entry.hash_per_rank).size() > 1) differing.push_back(&entry);
  std::ostringstream message;
  message << where << ": the replicas differ. ";
  if (differing.empty()) {  // every tensor agrees, but a group lists them in another order on some rank
    message << "They hold the same tensors, listed in another order.";
    throw Error(message.str());
  }
  message << differing.front()->name
          << " is the first tensor that differs: " << who_holds_what(differing.front()->hash_per_rank) << ".";
  if (differing.size() > 1) {
    message << " " << differing.size() - 1 << (differing.size() == 2 ? " more differs" : " more differ");
    constexpr size_t kNamed = 4;
    for (size_t i = 1; i < std::min(differing.size(), kNamed + 1); ++i)
      message << (i == 1 ? ": " : ", ") << differing[i]->name;
    if (differing.size() > kNamed + 1) message << " and " << differing.size() - kNamed - 1 << " other(s)";
    message << ".";
  }
  message << " docs/ddp.md, \"Checking that the replicas agree\", lists the usual causes.";
  throw Error(message.str());
}

}  // namespace sg::dist
