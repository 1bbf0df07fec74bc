#pragma once
// defines: dist::RunFingerprint, dist::disagreements, dist::check_ranks_agree — the settings every
//          rank of a run must share (the optimizer's hyper-parameters, mixed precision, each
//          loader's batch size and seed, ...), compared across the ranks once when they are set,
//          so that ranks started differently stop at once with an error naming the setting;
//          dist::ranks_by_value, dist::ranks_named — how such errors list the ranks.
#include <concepts>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/process_group.h"

namespace sg::dist {

// Note [Ranks agree on the run's settings]
// Data parallelism assumes every rank runs the same program with the same settings: the same
// model (DDP's constructor compares the parameters' names, shapes and dtypes), and also the same
// optimizer and hyper-parameters, the same mixed precision, and loaders that deal out one data
// set in one order. Nothing in the gradient all-reduce notices when they differ: ranks started
// with --lr 0.001 and --lr 0.01 average the same gradients and then step their replicas apart,
// ranks with different shuffling seeds train on overlapping shares of the data, ranks with
// different texts of equal vocabulary size learn two languages into one model. PyTorch checks
// none of this (DDP compares parameter shapes only). Here each place that sees such settings
// writes them into a RunFingerprint — named fields with their values as text — and compares
// it across ranks: DDP's constructor its options, the Accelerator its own options (mixed
// precision, accumulation) when it joins the group, the optimizer's type and every group's
// hyper-parameters at prepare(optimizer), the schedule's lrs at a ladder of steps at
// prepare(scheduler), each loader's data set size, batch size, number of
// batches, shuffling and seed at prepare(dataset, options), and what an app adds by name
// (train_gpt: its vocabulary) through Accelerator::check_agreement.
//
// Every rank gathers every rank's fingerprint and computes the same differences from the same
// texts, so all of them throw the same error at the same point, and none is left waiting in a
// collective that the others never reach. The message names each field that differs and the
// value each rank holds:
//   ranks disagree on optimizer.lr: rank 0 has 0.001, rank 1 has 0.01
// (ranks holding one value are listed together: "ranks 0-2, 4 have 64, rank 3 has 32").
//
// Only what must agree for the run to be right is compared. What may differ on purpose is not:
// the default generator (set_seed(seed, device_specific = true) gives each rank its own dropout
// draws), a loader's seed when it does not shuffle (it then seeds only the per-example
// augmentation draws, Note [Per-example random draws] in data/dataset.h), worker threads,
// pinned memory, trace files. A shuffling loader's seed must agree: DistributedSampler deals
// out one permutation drawn from it, and ranks with different ones overlap.
//
// The cost: at each check, two all-gathers (the texts' lengths, then the texts) of a few hundred
// bytes; a handful of checks when a run starts, none per step.
class RunFingerprint {
public:
  // Adds a field. The name is what the error shows ("optimizer.lr"); it must not repeat.
  void add(const std::string& name, std::string value);
  void add(const std::string& name, const char* value) { add(name, std::string(value)); }
  void add(const std::string& name, double value);  // the shortest text that reads back as `value`: "0.001"
  void add(const std::string& name, bool value);    // "true" or "false"
  template <std::integral Integer>
  void add(const std::string& name, Integer value) {
    add(name, std::to_string(value));
  }

  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

  // The fields as one text for the wire, and back.
  std::string to_text() const;
  static RunFingerprint from_text(const std::string& text);

private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// One line per field whose value is not the same on every rank ("ranks disagree on ..."), in
// the order of rank 0's fields; empty when all of them agree. `per_rank` is indexed by rank.
// A field that only some ranks have follows from another difference (an optimizer of another
// type has other hyper-parameters), so it is listed only when no field they all have differs.
std::vector<std::string> disagreements(const std::vector<RunFingerprint>& per_rank);

// The ranks grouped by the value each holds (nullopt: none), in the order of each value's first
// rank; `per_rank` is indexed by rank.
std::vector<std::pair<std::optional<std::string>, std::vector<int>>> ranks_by_value(
    const std::vector<std::optional<std::string>>& per_rank);

// "rank 3" or "ranks 0-2, 4": ascending ranks, runs of consecutive ones as a range.
std::string ranks_named(const std::vector<int>& ranks);

// Gathers every rank's `fingerprint` over `group` and, when they differ, throws on every rank
// the same sg::Error: "<where>: ..." with the lines of disagreements(). A collective: every rank
// of the group must call it, in the same order as its other collectives. Nothing to compare, and
// no communication, on a group of one.
void check_ranks_agree(ProcessGroup& group, const RunFingerprint& fingerprint, const std::string& where);

}  // namespace sg::dist
