// The Gloo process group across real processes on loopback: every collective, op and dtype on
// 2 and 3 ranks (tests/dist_worker_collectives.cpp checks the values), on ranks that count as two
// machines (the hierarchical all-reduce), and the failures a user meets: a rank that dies, one that
// never comes, ranks that disagree on the collective.
#include "core/cuda_runtime/runtime.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;

namespace {}  // namespace

TEST_CASE("every collective, reduce op, dtype and size gives the right values on 2 and 3 ranks") {
  // All ranks on this machine: all_reduce goes through shared memory (dist/shm_all_reduce.h).
  for (int world : {2, 3}) {
    CAPTURE(world);
    const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, world, {"all"});
    INFO(result.summary());
    CHECK(result.all_succeeded());
  }
}

TEST_CASE("all_reduce through Gloo's TCP gives the same values: SG_SHM_ALLREDUCE=0 on every rank, or on one") {
  // With the variable on rank 1 only, the ranks must agree to use Gloo, or they would wait for
  // each other on different transports.
  const auto everywhere = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"all"}, {{"SG_SHM_ALLREDUCE", "0"}});
  INFO(everywhere.summary());
  CHECK(everywhere.all_succeeded());
  const auto one_rank = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"all_shm_off_on_rank_1"});
  INFO(one_rank.summary());
  CHECK(one_rank.all_succeeded());
}

// SG_MACHINE_LABEL splits this machine in two (even and odd ranks), so these runs take the path
// of a group that spans machines (dist/hierarchical_all_reduce.h) in every CI run;
// scripts/multinode-test.sh runs it across network namespaces.
TEST_CASE("on two machines all_reduce goes hierarchical and every collective gives the right values") {
  // 3 ranks: a machine of two and a machine of one, whose rank is its own leader.
  for (int world : {3, 4}) {
    CAPTURE(world);
    const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, world, {"all", "two_machines"});
    INFO(result.summary());
    CHECK(result.all_succeeded());
  }
}

namespace {

// "bytes through gloo: N" from each rank's output, summed.
uint64_t bytes_through_gloo(const test::RankResults& result) {
  uint64_t total = 0;
  for (const std::string& output : result.outputs) {
    const size_t at = output.find("bytes through gloo: ");
    REQUIRE(at != std::string::npos);
    total += std::stoull(output.substr(at + 20));
  }
  return total;
}

}  // namespace

TEST_CASE("the hierarchical all-reduce gives every rank the same bits and half the bytes of Gloo's flat one") {
  // 2 machines x 2 ranks: only the two leaders all-reduce through Gloo, where the flat ring has all four.
  const auto hierarchical = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 4, {"across_machines", "two_machines"});
  INFO(hierarchical.summary());
  REQUIRE(hierarchical.all_succeeded());
  const auto flat = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 4, {"across_machines", "two_machines"},
                                    {{"SG_HIERARCHICAL_ALLREDUCE", "0"}});
  INFO(flat.summary());
  REQUIRE(flat.all_succeeded());
  CHECK(bytes_through_gloo(hierarchical) > 0);
  CHECK(2 * bytes_through_gloo(hierarchical) <= bytes_through_gloo(flat));
}

TEST_CASE("a rank that exits during a hierarchical all-reduce makes the others fail promptly, naming it") {
  // Rank 1 leads the odd machine: its machine's rank 3 sees it go in shared memory, the even
  // machine's leader (rank 0) in Gloo.
  const auto start = std::chrono::steady_clock::now();
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 4, {"dies", "two_machines"});
  INFO(result.summary());
  CHECK(result.exit_code(1) == 9);
  for (int rank : {0, 2, 3}) {
    CAPTURE(rank);
    CHECK(result.exit_code(rank) == 3);
    CHECK(test::contains(result.output(rank), "all_reduce(SUM) #1 on f32[10] (40 bytes) failed"));
  }
  CHECK(test::contains(result.output(3), "rank 1 (pid"));
  CHECK(test::contains(result.output(3), "exited during the shared-memory all-reduce"));
  CHECK(test::contains(result.output(0), "rank(s) 1 exited (their connection to the store closed)"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
}

TEST_CASE("a rank that never reaches a hierarchical all-reduce: the others time out naming it") {
  // Rank 1 leads the odd machine: rank 3 waits for it in shared memory, rank 0 in Gloo, rank 2 for rank 0.
  const auto result =
      test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 4, {"late", "two_machines"}, {{"SG_DIST_TIMEOUT", "1"}});
  INFO(result.summary());
  CHECK(result.exit_code(1) == 0);
  for (int rank : {0, 2, 3}) {
    CAPTURE(rank);
    CHECK(result.exit_code(rank) == 3);
    CHECK(test::contains(result.output(rank), "all_reduce(SUM) #0 on f32[10]"));
    CHECK(test::contains(result.output(rank), "rank(s) 1 never reached collective #0"));
  }
  CHECK(test::contains(result.output(3), "rank 1 did not arrive at the shared-memory all-reduce in time"));
}

TEST_CASE("every collective of an empty tensor waits for every rank, as one with data does") {
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"empty_collectives_wait"});
  INFO(result.summary());
  CHECK(result.all_succeeded());
}

TEST_CASE("a rank that exits mid-run makes the others fail promptly, naming it") {
  const auto start = std::chrono::steady_clock::now();
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"dies"});
  INFO(result.summary());
  CHECK(result.exit_code(1) == 9);
  CHECK(result.exit_code(0) == 3);
  CHECK(test::contains(result.output(0), "all_reduce(SUM) #1 on f32[10] (40 bytes) failed"));
  CHECK(test::contains(result.output(0), "rank(s) 1 exited (their connection to the store closed)"));
  // Seen by the shared-memory all-reduce itself, which looks at the peer it waits for.
  CHECK(test::contains(result.output(0), "exited during the shared-memory all-reduce"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
}

TEST_CASE("a frozen rank 0, which hosts the store, makes the others fail within the timeout instead of hanging") {
  // Rank 1 must fail by itself: were it to hang, the harness would kill it at the time limit (exit -1).
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"rank0_freezes"}, {{"SG_DIST_TIMEOUT", "1"}}, 8);
  INFO(result.summary());
  CHECK(result.exit_code(1) == 3);
  CHECK(test::contains(result.output(1), "did not answer within 1000 ms"));
  CHECK(test::contains(result.output(1), "may be frozen"));
  CHECK(result.exit_code(0) == -1);  // still stopped at the time limit, then killed by the harness
}

TEST_CASE("a rank that never reaches a collective: the others time out naming it and the collective") {
  // The marks of who started what live in the shared-memory segments, or (SG_SHM_ALLREDUCE=0) in
  // the store (Note [Marks in the segments] in dist/shm_all_reduce.cpp).
  for (const char* shared_memory : {"1", "0"}) {
    CAPTURE(shared_memory);
    const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"late"},
                                        {{"SG_DIST_TIMEOUT", "1"}, {"SG_SHM_ALLREDUCE", shared_memory}});
    INFO(result.summary());
    CHECK(result.exit_code(0) == 3);
    CHECK(test::contains(result.output(0), "all_reduce(SUM) #0 on f32[10]"));
    CHECK(test::contains(result.output(0), "rank(s) 1 never reached collective #0"));
    CHECK(test::contains(result.output(0),
                         "rank(s) 1 still hold their store connection but did not fail with it"));  // late, not dead
  }
}

TEST_CASE("a rank done with its part of a failed collective is named as gone on, not as lost") {
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 3, {"went_on"}, {{"SG_DIST_TIMEOUT", "1"}});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 3);
  CHECK(test::contains(result.output(0), "broadcast(root 0) #0 on f32[10]"));
  // The root waits in the shared-memory broadcast for every rank to have copied its data.
  CHECK(test::contains(result.output(0), "rank 2 did not finish its part of the shared-memory broadcast in time"));
  CHECK(test::contains(result.output(0), "rank(s) 2 never reached collective #0"));
  CHECK(test::contains(result.output(0), "rank(s) 1 finished their part of collective #0 and went on to a later one"));
  CHECK(test::contains(result.output(0), "rank(s) 2 still hold their store connection"));
}

TEST_CASE("a rank that never joins: init_process_group fails naming it") {
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"never_joins"}, {{"SG_DIST_TIMEOUT", "1"}});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 3);
  CHECK(test::contains(result.output(0), "rank(s) 1 did not join within"));
  CHECK(result.exit_code(1) == 3);  // and the late rank finds nobody at the store
}

TEST_CASE("SG_DIST_DEBUG: ranks calling different collectives all fail, showing both sides") {
  const auto result = test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"mismatch"}, {{"SG_DIST_DEBUG", "1"}});
  INFO(result.summary());
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(test::contains(result.output(rank),
                         "rank 0 called all_reduce(SUM) #0 on f32[10] (40 bytes) but rank 1 called "
                         "broadcast(root 0) #0 on f32[4] (16 bytes)"));
  }
}

TEST_CASE("without SG_DIST_DEBUG, an all_reduce met by a broadcast of as many bytes fails on shared memory") {
  // Both travel through the shared-memory segments, whose headers name the collective: rank 1, which
  // reads rank 0's header first, says which two met, where they would otherwise read each other's
  // bytes. Rank 0 then fails waiting for rank 1.
  const auto result =
      test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"mismatch_same_bytes"}, {{"SG_DIST_TIMEOUT", "2"}});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 3);
  CHECK(result.exit_code(1) == 3);
  CHECK(test::contains(result.output(1),
                       "rank 0 all-reduces, rank 1 broadcasts: every rank must call the same collective"));
}

TEST_CASE("set_timeout while collectives run under SG_DIST_DEBUG: values stay right and the new timeout governs") {
  const auto result =
      test::run_ranks(SG_DIST_WORKER_COLLECTIVES, 2, {"set_timeout_while_running"}, {{"SG_DIST_DEBUG", "1"}});
  INFO(result.summary());
  CHECK(result.exit_code(1) == 0);  // its 40 all-reduces were right, then it idled past rank 0's timeout
  CHECK(result.exit_code(0) == 3);
  CHECK(test::contains(result.output(0), "all_reduce(SUM) #40 on f32[10]"));
  CHECK(test::contains(result.output(0), "300ms"));  // Gloo's message names the timeout it waited
  CHECK(test::contains(result.output(0), "rank(s) 1 never reached collective #40"));
}

TEST_CASE("backend nccl without a usable GPU is an error saying why, before any rendezvous") {
  if (cuda::is_available()) return;  // tests/cuda/test_cuda_nccl.cpp runs the NCCL group there
  dist::InitOptions options;
  options.backend = "nccl";
  options.rank = 0;
  options.world_size = 1;
  CHECK_THROWS_WITH_AS(dist::init_process_group(options),
                       doctest::Contains("init_process_group: backend 'nccl' needs a GPU"), Error);
  CHECK(!dist::is_initialized());
}

TEST_CASE("an unknown backend is an error naming the ones there are") {
  dist::InitOptions options;
  options.backend = "mpi";
  options.rank = 0;
  options.world_size = 1;
  CHECK_THROWS_WITH_AS(dist::init_process_group(options),
                       doctest::Contains("unknown backend 'mpi' (gloo for CPU tensors, nccl for CUDA tensors)"), Error);
}
