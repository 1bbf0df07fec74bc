// dist::launch_environment: where this process sits in a run, read from the variables that
// torchrun / sgrun, Slurm's srun or Open MPI's mpirun set (a map stands in for the environment).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>

#include "core/error.h"
#include "dist/dist.h"
#include "dist/environment.h"
#include "launch/launcher.h"
#include "train/accelerator.h"

using namespace sg;
using namespace sg::dist;

namespace {

using Variables = std::map<std::string, std::string>;

std::optional<LaunchEnvironment> read(const Variables& variables) {
  return launch_environment([&](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
  });
}

// srun's variables for task `rank` of a job whose nodes run `tasks_per_node` tasks each.
Variables slurm(int rank, int world, int local_rank, int node, const std::string& tasks_per_node) {
  return {{"SLURM_PROCID", std::to_string(rank)},        {"SLURM_NTASKS", std::to_string(world)},
          {"SLURM_LOCALID", std::to_string(local_rank)}, {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_TASKS_PER_NODE", tasks_per_node},      {"SLURM_JOB_NODELIST", "gpu[07-09],cpu1"}};
}

}  // namespace

TEST_CASE("no launcher's variables: nullopt, so the program runs as one process") {
  CHECK_FALSE(read({}).has_value());
  CHECK_FALSE(read({{"HOME", "/root"}, {"MASTER_PORT", "1234"}, {"SLURM_JOB_ID", "77"}}).has_value());
}

TEST_CASE("torchrun / sgrun variables give rank, local rank, both world sizes and the master") {
  const auto env = read({{"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "node7"},
                         {"MASTER_PORT", "29411"}});
  REQUIRE(env);
  CHECK(env->source == "torchrun");
  CHECK(env->rank == 3);
  CHECK(env->world_size == 4);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 2);
  CHECK(env->master_addr == "node7");
  CHECK(env->master_port == 29411);
}

TEST_CASE("without local variables or a master the job is one machine at 127.0.0.1:29500") {
  const auto env = read({{"RANK", "1"}, {"WORLD_SIZE", "3"}});
  REQUIRE(env);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 3);
  CHECK(env->master_addr == "127.0.0.1");
  CHECK(env->master_port == 29500);
}

TEST_CASE("torchrun's variables win over Slurm's and Open MPI's") {
  Variables variables = slurm(0, 8, 0, 0, "4(x2)");
  variables.insert({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  const auto env = read(variables);
  REQUIRE(env);
  CHECK(env->source == "torchrun");
  CHECK(env->rank == 1);
}

TEST_CASE("Slurm: rank and local rank from SLURM_PROCID and SLURM_LOCALID, this node's count from the task list") {
  // Nodes 0 and 1 run 3 tasks each, node 2 runs 1: ranks 0-2, 3-5, 6.
  const auto middle = read(slurm(4, 7, 1, 1, "3(x2),1"));
  REQUIRE(middle);
  CHECK(middle->source == "slurm");
  CHECK(middle->rank == 4);
  CHECK(middle->world_size == 7);
  CHECK(middle->local_rank == 1);
  CHECK(middle->local_world_size == 3);
  const auto last = read(slurm(6, 7, 0, 2, "3(x2),1"));
  REQUIRE(last);
  CHECK(last->local_world_size == 1);
  CHECK(read(slurm(2, 6, 0, 1, "2,4"))->local_world_size == 4);
}

TEST_CASE("Slurm: the step's task list wins over the job's, and a lone SLURM_NTASKS_PER_NODE counts for every node") {
  Variables step = slurm(1, 2, 1, 0, "4(x2)");
  step.insert({"SLURM_STEP_TASKS_PER_NODE", "2"});
  CHECK(read(step)->local_world_size == 2);

  Variables requested = slurm(5, 6, 2, 1, "");
  requested.erase("SLURM_TASKS_PER_NODE");
  requested.insert({"SLURM_NTASKS_PER_NODE", "3"});
  CHECK(read(requested)->local_world_size == 3);

  Variables neither = slurm(1, 2, 1, 0, "");
  neither.erase("SLURM_TASKS_PER_NODE");
  CHECK(read(neither)->local_world_size == 2);  // one machine
}

TEST_CASE("Slurm on several machines without MASTER_ADDR meets at the first host of the node list") {
  const auto env = read(slurm(4, 7, 1, 1, "3(x2),1"));
  REQUIRE(env);
  CHECK(env->master_addr == "gpu07");
  CHECK(env->master_port == 29500);
  Variables variables = slurm(4, 7, 1, 1, "3(x2),1");
  variables["SLURM_JOB_NODELIST"] = "rack[2-3]-n[010,012]";
  CHECK(read(variables)->master_addr == "rack2-n010");
  variables["MASTER_ADDR"] = "head";
  variables["MASTER_PORT"] = "4000";
  CHECK(read(variables)->master_addr == "head");
  CHECK(read(variables)->master_port == 4000);
  CHECK(read(slurm(1, 3, 1, 0, "3"))->master_addr == "127.0.0.1");  // one machine
}

TEST_CASE("Slurm: a malformed or too short task list is an error naming the variable and its value") {
  for (const char* list : {"3(x2", "3(2),1", "three", "3,,1", "0", "3(x0)", "3(x2),1,"}) {
    CAPTURE(list);
    CHECK_THROWS_WITH_AS(
        read(slurm(0, 7, 0, 0, list)),
        doctest::Contains((std::string("SLURM_TASKS_PER_NODE='") + list + "' is not a Slurm task count list").c_str()),
        Error);
  }
  CHECK_THROWS_WITH_AS(read(slurm(0, 3, 0, 0, "1(x4)")), doctest::Contains("SLURM_TASKS_PER_NODE='1(x4)'"), Error);
  CHECK_THROWS_WITH_AS(read(slurm(6, 7, 0, 3, "3(x2),1")),
                       doctest::Contains("SLURM_NODEID=3 but SLURM_TASKS_PER_NODE='3(x2),1' lists 3 nodes"), Error);
  Variables no_node = slurm(6, 7, 0, 2, "3(x2),1");
  no_node.erase("SLURM_NODEID");
  CHECK_THROWS_WITH_AS(read(no_node), doctest::Contains("SLURM_NODEID (which one is this) is not set"), Error);
  CHECK_THROWS_WITH_AS(read(slurm(3, 7, 3, 1, "3(x2),1")), doctest::Contains("SLURM_LOCALID=3 is not in [0, 3)"),
                       Error);
}

TEST_CASE("Open MPI variables give rank, local rank and both world sizes") {
  const auto env = read({{"OMPI_COMM_WORLD_RANK", "5"},
                         {"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                         {"MASTER_ADDR", "mpi-head"},
                         {"MASTER_PORT", "1234"}});
  REQUIRE(env);
  CHECK(env->source == "openmpi");
  CHECK(env->rank == 5);
  CHECK(env->world_size == 8);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 4);
  CHECK(env->master_addr == "mpi-head");
  CHECK(env->master_port == 1234);
}

TEST_CASE("a job on several machines without MASTER_ADDR (and no Slurm node list) is an error saying to set it") {
  CHECK_THROWS_WITH_AS(
      read({{"OMPI_COMM_WORLD_RANK", "1"},
            {"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
      doctest::Contains("the openmpi job spans several machines (2 of its 4 processes are on this one) "
                        "but MASTER_ADDR is not set"),
      Error);
}

TEST_CASE("a missing or malformed variable is an error naming it") {
  CHECK_THROWS_WITH_AS(read({{"RANK", "0"}}), doctest::Contains("RANK is set but WORLD_SIZE is not"), Error);
  CHECK_THROWS_WITH_AS(read({{"SLURM_PROCID", "0"}}), doctest::Contains("SLURM_PROCID is set but SLURM_NTASKS is not"),
                       Error);
  CHECK_THROWS_WITH_AS(read({{"OMPI_COMM_WORLD_RANK", "0"}}),
                       doctest::Contains("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"), Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), doctest::Contains("RANK='x' is not a whole number"),
                       Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "0"}, {"WORLD_SIZE", "2 "}}),
                       doctest::Contains("WORLD_SIZE='2 ' is not a whole number"), Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", ""}}),
                       doctest::Contains("LOCAL_RANK='' is not a whole number"), Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                       doctest::Contains("RANK=2 is not in [0, WORLD_SIZE=2)"), Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}),
                       doctest::Contains("MASTER_PORT='http' is not a whole number"), Error);
  CHECK_THROWS_WITH_AS(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
                       doctest::Contains("MASTER_PORT=70000 is not a TCP port"), Error);
}

TEST_CASE("SG_DIST_TIMEOUT is a finite number of seconds up to one week, anything else is an error naming it") {
  const auto timeout = [](const std::string& value) {
    return timeout_from_environment([&](const std::string& name) -> std::optional<std::string> {
      return name == "SG_DIST_TIMEOUT" ? std::optional<std::string>(value) : std::nullopt;
    });
  };
  CHECK(!timeout_from_environment([](const std::string&) { return std::nullopt; }).has_value());
  CHECK(timeout("20") == std::chrono::seconds(20));
  CHECK(timeout("0.5") == std::chrono::milliseconds(500));
  CHECK(timeout("604800") == std::chrono::hours(7 * 24));
  for (const char* bad : {"inf", "nan", "1e10", "604801", "0", "-1", "10s", " 5", "+5", ""}) {
    const std::string expected =
        "SG_DIST_TIMEOUT='" + std::string(bad) + "' is not a number of seconds in (0, 604800] (at most one week)";
    CHECK_THROWS_WITH_AS(timeout(bad), doctest::Contains(expected.c_str()), Error);
  }
  // init_process_group reads it before it starts anything.
  InitOptions one_process;
  one_process.rank = 0;
  one_process.world_size = 1;
  ::setenv("SG_DIST_TIMEOUT", "inf", 1);
  CHECK_THROWS_WITH_AS(init_process_group(one_process), doctest::Contains("SG_DIST_TIMEOUT='inf'"), Error);
  ::unsetenv("SG_DIST_TIMEOUT");
  CHECK_FALSE(is_initialized());
}

TEST_CASE("the Accelerator joins a process group from Slurm's variables as it does from sgrun's") {
  REQUIRE(std::getenv("RANK") == nullptr);  // only Slurm's variables below
  const std::string port = std::to_string(find_free_port());
  const Variables slurm_task = {{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "1"},
                                {"SLURM_LOCALID", "0"},
                                {"SLURM_TASKS_PER_NODE", "1"},
                                {"MASTER_PORT", port}};
  for (const auto& [name, value] : slurm_task) ::setenv(name.c_str(), value.c_str(), 1);
  {
    Accelerator accelerator;
    CHECK(is_initialized());
    CHECK(accelerator.num_processes() == 1);
    CHECK(get_local_world_size() == 1);
  }
  CHECK_FALSE(is_initialized());  // the Accelerator that started the group ends it
  for (const auto& [name, value] : slurm_task) ::unsetenv(name.c_str());
}

TEST_CASE("rank 0 warns when MASTER_ADDR is a host name that put the store on loopback and other machines have ranks") {
  LaunchEnvironment env;
  env.world_size = 4;
  env.local_world_size = 2;
  env.master_addr = "node-a";
  const auto warning = loopback_master_warning(env, "127.0.1.1");  // Debian's /etc/hosts entry for node-a
  REQUIRE(warning.has_value());
  CHECK(*warning ==
        "warning: MASTER_ADDR 'node-a' resolves to 127.0.1.1, a loopback address, on rank 0's machine, so "
        "the store listens there only, but 2 of the job's 4 ranks run on other machines, which cannot "
        "reach it (Debian and Ubuntu map a machine's own name to 127.0.1.1 in /etc/hosts). Set "
        "MASTER_ADDR to this machine's address on the network the machines share, or map the name to it "
        "in /etc/hosts.");
  CHECK(loopback_master_warning(env, "::1").has_value());
  // Nothing to say: a network address; all ranks on this machine; a loopback address or
  // "localhost" written on purpose (several "nodes" on one machine).
  CHECK_FALSE(loopback_master_warning(env, "10.0.0.7").has_value());
  LaunchEnvironment one_machine = env;
  one_machine.local_world_size = 4;
  CHECK_FALSE(loopback_master_warning(one_machine, "127.0.1.1").has_value());
  for (const char* deliberate : {"127.0.0.1", "localhost", "::1"}) {
    LaunchEnvironment loopback = env;
    loopback.master_addr = deliberate;
    CHECK_FALSE(loopback_master_warning(loopback, "127.0.0.1").has_value());
  }
  CHECK(is_numeric_address("10.1.2.3"));
  CHECK(is_numeric_address("fe80::1"));
  CHECK_FALSE(is_numeric_address("node-a"));
  CHECK_FALSE(is_numeric_address("10.1.2"));
}
