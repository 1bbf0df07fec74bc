// parallel_for: every index is visited exactly once, whatever threads OpenMP actually grants; a
// program starts with a short OpenMP spin (Note [Threads that yield] in core/parallel.cpp).
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "helpers.h"

using namespace sg;

namespace {
// How often parallel_for(n, grain) visits each index.
std::vector<int> visits(int64_t n, int64_t grain) {
  std::vector<int> count(static_cast<size_t>(n), 0);
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++count[static_cast<size_t>(i)];  // chunks are disjoint: no race
  });
  return count;
}
}  // namespace

TEST_CASE("parallel_for visits every index once for any thread count and grain") {
  for (int threads : {1, 2, 3}) {
    test::NumThreadsGuard guard(threads);
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      for (int64_t grain : {int64_t{1}, int64_t{64}, kParallelGrain}) {
        INFO("threads ", threads, ", n ", n, ", grain ", grain);
        CHECK(visits(n, grain) == std::vector<int>(static_cast<size_t>(n), 1));
      }
    }
  }
}

TEST_CASE("parallel_for visits every index when OpenMP grants fewer threads than asked") {
  test::NumThreadsGuard guard(2);
  std::vector<int> count;
  // A teams region with a thread limit of 1 is an in-process way to get a one-thread team
  // where two were asked for (as OMP_THREAD_LIMIT=1 or OMP_DYNAMIC would).
#pragma omp teams num_teams(1) thread_limit(1)
  count = visits(100000, 1000);
  CHECK(count == std::vector<int>(100000, 1));
}

TEST_CASE("parallel_for inside a parallel region runs serially over the whole range") {
  test::NumThreadsGuard guard(2);
  std::vector<int> count;
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    count = visits(50000, 100);
  }
  CHECK(count == std::vector<int>(50000, 1));
}

namespace {
// The spin count libgomp runs with in this test program started again with neither
// GOMP_SPINCOUNT nor OMP_WAIT_POLICY (nor a preloaded Valgrind) but `variables`: OMP_DISPLAY_ENV=verbose makes libgomp
// print it at every start, so the last value printed is the one the program runs with.
std::string spin_count_of_a_fresh_start(const std::string& variables) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY -u LD_PRELOAD OMP_DISPLAY_ENV=verbose " +
                              variables + " '" + self + "' --help 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (const size_t read = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), read);
  pclose(pipe);
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = output.rfind(key);
  INFO(output);
  REQUIRE(at != std::string::npos);
  const size_t begin = at + key.size();
  return output.substr(begin, output.find('\'', begin) - begin);
}
}  // namespace

TEST_CASE("a program starts with a short OpenMP spin unless the user chose a spin or a wait policy") {
  CHECK(spin_count_of_a_fresh_start("") == "1000");
  CHECK(spin_count_of_a_fresh_start("GOMP_SPINCOUNT=123") == "123");
  CHECK(spin_count_of_a_fresh_start("OMP_WAIT_POLICY=passive") == "0");
}
