// cpu::measure_machine_peak (Note [Two peaks for MFU] in core/cpu/machine_peak.h): what it reports and what
// it leaves behind. No figure is checked against a speed: tests never assert on time.
#include <cmath>

#include "core/cpu/machine_peak.h"
#include "helpers.h"

using namespace sg;

TEST_CASE("measure_machine_peak measures both peaks at the thread count asked for and leaves the pool as it was") {
  set_num_threads(2);
  const cpu::MachinePeak peak = cpu::measure_machine_peak(1);
  CHECK(get_num_threads() == 2);
  CHECK(peak.threads == 1);
  CHECK(!peak.vector_width.empty());
  CHECK((std::isfinite(peak.fma_gflops) && peak.fma_gflops > 0));
  CHECK((std::isfinite(peak.gemm_gflops) && peak.gemm_gflops > 0));
  CHECK(peak.str().find("1 thread(s)") != std::string::npos);
  CHECK(cpu::measure_machine_peak().threads == 2);  // 0: the pool's size
  set_num_threads(1);
}

TEST_CASE("measure_machine_peak refuses a negative thread count") {
  CHECK_THROWS_WITH(cpu::measure_machine_peak(-1), doctest::Contains("thread count"));
}
