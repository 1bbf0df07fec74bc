// One rank of tests/test_dist_collectives.cpp (and, under sgrun, of the jobs that
// tests/test_launcher_recovery.cpp stops while they set up, and of scripts/multinode-test.sh
// across network namespaces).
// Usage: dist_worker_collectives <scenario> [two_machines]
// With two_machines the even and the odd ranks count as two machines (SG_MACHINE_LABEL), so that
// all_reduce takes the hierarchical path (dist/hierarchical_all_reduce.h).
// Exit codes: 0 all checks passed, 1 a result was wrong (printed), 3 an sg::Error (printed).
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective_expectations.h"
#include "dist/process_group_gloo.h"
#include "syncgrad.h"

using namespace sg;
using namespace sg::test::collectives;

namespace {

// Gloo's AVG divides the exact sum in the tensor's dtype: off by at most half a unit in the last place.
double gloo_avg_tolerance(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 ? 1e-2 : dtype == DType::f32 ? 1e-6 : 0;
}

// On ranks that count as two machines all_reduce is hierarchical, or with
// SG_HIERARCHICAL_ALLREDUCE=0 Gloo's flat one.
void expect_path_across_machines(const dist::ProcessGroup& group) {
  const char* hierarchical = std::getenv("SG_HIERARCHICAL_ALLREDUCE");
  const bool flat = hierarchical != nullptr && hierarchical == std::string("0");
  expect(dynamic_cast<const dist::ProcessGroupGloo&>(group).all_reduce_path() ==
             (flat ? dist::ProcessGroupGloo::AllReducePath::gloo : dist::ProcessGroupGloo::AllReducePath::hierarchical),
         "the all_reduce path of a group on two machines");
}

// The same bits of a float sum on every rank, and a line "bytes through gloo: N" for the test to
// compare the hierarchical and the flat path with.
void check_across_machines(dist::ProcessGroup& group) {
  const auto& gloo = dynamic_cast<const dist::ProcessGroupGloo&>(group);
  Generator generator(static_cast<uint64_t>(1000 + group.rank()));
  // Over two chunks of the shared-memory stages, and not a multiple of anything.
  Tensor sum = randn({2 * (int64_t{4} << 20) / 4 + 12345}, {}, &generator);
  const uint64_t before = gloo.all_reduce_bytes_through_gloo();
  group.all_reduce(sum)->wait();
  std::cout << "bytes through gloo: " << gloo.all_reduce_bytes_through_gloo() - before << "\n";
  std::vector<Tensor> everyone;
  for (int r = 0; r < group.size(); ++r) everyone.push_back(empty_like(sum));
  group.all_gather(everyone, sum)->wait();
  for (int r = 0; r < group.size(); ++r)
    expect(std::memcmp(everyone[r].raw_data(), sum.raw_data(), sum.numel() * sizeof(float)) == 0,
           "rank " + std::to_string(r) + "'s float sum has the bits of rank " + std::to_string(group.rank()) + "'s");
}

// reduce_scatter_tensor and all_gather_into_tensor on random f32 of odd sizes, against the same
// data moved by all_gather and summed here: every rank draws from its own seed, and every rank
// can draw the others' inputs too.
void check_flat_collectives_on_random_inputs(dist::ProcessGroup& group) {
  const int world = group.size(), rank = group.rank();
  const auto input_of = [&](int r, int64_t n) {
    Generator generator(1000 + static_cast<uint64_t>(r) * 7919 + static_cast<uint64_t>(n));
    return randn({world * n}, {DType::f32}, &generator);
  };
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1023}, int64_t{65537}}) {
    Tensor sum = zeros({world * n}, {DType::f64});
    for (int r = 0; r < world; ++r) sum = sum + input_of(r, n).to(DType::f64);
    const Tensor my_chunk = sum.view({world, n}).select(0, rank);
    for (dist::ReduceOp op : {dist::ReduceOp::SUM, dist::ReduceOp::AVG}) {
      Tensor out = empty({n});
      group.reduce_scatter_tensor(out, input_of(rank, n), op)->wait();
      const Tensor expected = op == dist::ReduceOp::AVG ? my_chunk / static_cast<double>(world) : my_chunk;
      // f32 sums of a few N(0, 1) values, in Gloo's order rather than this f64 one.
      expect((out.to(DType::f64) - expected).abs().max().item() < 1e-5,
             std::string("reduce_scatter_tensor(") + dist::reduce_op_name(op) + ") of random f32[" +
                 std::to_string(world * n) + "]");
    }
    const Tensor mine = input_of(rank, n).view({world, n}).select(0, 0).contiguous();
    Tensor flat = empty({world * n});
    group.all_gather_into_tensor(flat, mine)->wait();
    for (int r = 0; r < world; ++r)
      expect(
          (flat.view({world, n}).select(0, r) - input_of(r, n).view({world, n}).select(0, 0)).abs().max().item() == 0,
          "all_gather_into_tensor of random f32[" + std::to_string(n) + "]: chunk " + std::to_string(r));
  }
}

// A tensor of zeros_for_all_reduce, all-reduced through a view at an offset: the average of every
// rank's values, reduced where it lies when all_reduce goes through shared memory (counted in
// all_reduce_bytes_in_place), through Gloo otherwise.
void check_all_reduce_in_place(dist::ProcessGroup& group) {
  const auto& gloo = dynamic_cast<const dist::ProcessGroupGloo&>(group);
  const int64_t n = 3 * (int64_t{4} << 20) / 4 / 2 + 777;  // more than one 4 MB round of the segments
  Tensor buffer = group.zeros_for_all_reduce(n + 10, DType::f32);
  expect(buffer.abs().max().item() == 0, "zeros_for_all_reduce gives zeros");
  const auto values_of = [&](int r) {
    Generator generator(static_cast<uint64_t>(500 + r));
    return randn({n}, {}, &generator);
  };
  Tensor view = buffer.narrow(0, 3, n);
  const uint64_t before = gloo.all_reduce_bytes_in_place();
  for (int call = 0; call < 2; ++call) {
    view.copy_(values_of(group.rank()));
    group.all_reduce(view, dist::ReduceOp::AVG)->wait();
  }
  Tensor sum = zeros({n}, {DType::f64});
  for (int r = 0; r < group.size(); ++r) sum = sum + values_of(r).to(DType::f64);
  expect((view.to(DType::f64) - sum / static_cast<double>(group.size())).abs().max().item() < 1e-5,
         "all_reduce(AVG) of a view of zeros_for_all_reduce");
  const bool shared = gloo.all_reduce_path() == dist::ProcessGroupGloo::AllReducePath::shared_memory;
  expect(gloo.all_reduce_bytes_in_place() - before == (shared ? 2 * static_cast<uint64_t>(n) * 4 : 0),
         shared ? "both all-reduces went in place" : "nothing goes in place without shared memory");
}

// Every collective of an empty tensor must still wait for every rank (Note [A collective of
// nothing still waits] in dist/process_group_gloo.cpp): rank 1 arrives late at each, and rank 0
// must not leave before rank 1 arrived. Both read the same monotonic clock (one machine), so the
// check is about order, not about how long anything took.
void check_empty_collectives_wait(dist::ProcessGroup& group) {
  const auto now_ns = [] {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  };
  const std::vector<std::pair<std::string, std::function<void()>>> collectives = {
      {"all_reduce",
       [&] {
         Tensor t = empty({0});
         group.all_reduce(t)->wait();
       }},
      {"broadcast",
       [&] {
         Tensor t = empty({0});
         group.broadcast(t, 0)->wait();
       }},
      {"reduce",
       [&] {
         Tensor t = empty({0});
         group.reduce(t, 0)->wait();
       }},
      {"all_gather",
       [&] {
         std::vector<Tensor> outs = {empty({0}), empty({0})};
         group.all_gather(outs, empty({0}))->wait();
       }},
      {"gather",
       [&] {
         std::vector<Tensor> outs = {empty({0}), empty({0})};
         group.gather(outs, empty({0}), 0)->wait();
       }},
      {"scatter",
       [&] {
         Tensor out = empty({0});
         group.scatter(out, {empty({0}), empty({0})}, 0)->wait();
       }},
      {"reduce_scatter_tensor",
       [&] {
         Tensor out = empty({0});
         group.reduce_scatter_tensor(out, empty({0}))->wait();
       }},
      {"all_gather_into_tensor",
       [&] {
         Tensor out = empty({0});
         group.all_gather_into_tensor(out, empty({0}))->wait();
       }},
  };
  for (const auto& [name, run] : collectives) {
    double mark = 0;
    if (group.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      mark = now_ns();  // arrival
    }
    run();
    if (group.rank() == 0) mark = now_ns();  // departure
    Tensor mine = full({1}, mark, {DType::f64});
    std::vector<Tensor> marks = {empty({1}, {DType::f64}), empty({1}, {DType::f64})};
    group.all_gather(marks, mine)->wait();
    expect(marks[0].item() >= marks[1].item(), name + " of an empty tensor let rank 0 leave before rank 1 arrived");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "never_joins" && std::getenv("RANK") == std::string("1"))
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    if (scenario == "all_shm_off_on_rank_1" && std::getenv("RANK") == std::string("1"))
      ::setenv("SG_SHM_ALLREDUCE", "0", 1);
    const bool two_machines = argc > 2 && argv[2] == std::string("two_machines");
    if (two_machines) ::setenv("SG_MACHINE_LABEL", std::to_string(std::atoi(std::getenv("RANK")) % 2).c_str(), 1);
    dist::init_process_group();
    dist::ProcessGroup& group = dist::default_group();
    if (two_machines || scenario == "across_machines") expect_path_across_machines(group);
    if (scenario == "all" || scenario == "all_shm_off_on_rank_1") {
      check_every_collective(group, Device::cpu(), gloo_avg_tolerance);
      check_flat_collectives_on_random_inputs(group);
      check_all_reduce_in_place(group);
    } else if (scenario == "across_machines") {
      check_across_machines(group);
    } else if (scenario == "dies") {
      group.barrier()->wait();
      if (group.rank() == 1) std::_Exit(9);  // gone, mid-run, without a goodbye
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "rank0_freezes") {
      group.barrier()->wait();
      if (group.rank() == 0) ::raise(SIGSTOP);  // frozen, as by a debugger or a hung machine; the test kills it
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "late") {
      if (group.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return 0;
      }
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "went_on") {
      // Rank 2 is late; rank 1 has its broadcast data from rank 0 and waits in the next collective.
      // Rank 2 stays alive well past rank 0's 1 s timeout and report, however late a loaded
      // machine starts rank 0: the report must find it still connected.
      if (group.rank() == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(8000));
        return 0;
      }
      Tensor t = ones({10});
      group.broadcast(t, 0)->wait();
      if (group.rank() == 1) group.all_reduce(t)->wait();
    } else if (scenario == "mismatch") {
      Tensor a = ones({10}), b = ones({4});
      if (group.rank() == 0) group.all_reduce(a)->wait();
      else group.broadcast(b, 0)->wait();
    } else if (scenario == "mismatch_same_bytes") {
      Tensor t = ones({10});
      if (group.rank() == 0) group.all_reduce(t)->wait();
      else group.broadcast(t, 0)->wait();
    } else if (scenario == "set_timeout_while_running") {
      // Under SG_DIST_DEBUG the communication thread reads the timeout for every fingerprint
      // exchange while this thread changes it: the values must still come out right (and TSan
      // must stay quiet), and the last timeout set must govern the collective issued after it.
      std::vector<Tensor> tensors;
      std::vector<dist::WorkPtr> works;
      for (int i = 0; i < 40; ++i) {
        tensors.push_back(full({64}, static_cast<double>(group.rank() + 1 + i)));
        works.push_back(group.all_reduce(tensors.back()));
        group.set_timeout(std::chrono::milliseconds(5000 + 100 * i));
      }
      for (size_t i = 0; i < works.size(); ++i) {
        works[i]->wait();
        const double expected = 3.0 + 2.0 * static_cast<double>(i);  // (1 + i) + (2 + i)
        if (tensors[i].min().item() != expected || tensors[i].max().item() != expected) {
          std::cout << "all_reduce #" << i << " gave " << tensors[i].min().item() << ".." << tensors[i].max().item()
                    << ", expected " << expected << "\n";
          ++failures;
        }
      }
      group.set_timeout(std::chrono::milliseconds(300));
      if (group.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return failures == 0 ? 0 : 1;
      }
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "a_few_all_reduces") {
      Tensor t = ones({1 << 18});
      for (int step = 0; step < 20; ++step) group.all_reduce(t)->wait();
      if (t.min().item() != std::pow(2.0, 20)) {
        std::cout << "20 all-reduces of ones on 2 ranks gave " << t.min().item() << "\n";
        ++failures;
      }
    } else if (scenario == "empty_collectives_wait") {
      check_empty_collectives_wait(group);
    } else if (scenario == "never_joins") {
      // rank 0 gives up waiting for rank 1 at init
    } else {
      std::cout << "unknown scenario " << scenario << "\n";
      return 2;
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cout << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
