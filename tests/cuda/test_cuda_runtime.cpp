// The CUDA runtime, the caching allocator and host<->device copies on a real GPU.
#include "core/cuda_runtime/event.h"
#include "core/cuda_runtime/runtime.h"
#include "cuda_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

TEST_CASE("a tensor copied to the GPU and back is unchanged, for every dtype and for strided views") {
  for (DType dtype :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    CAPTURE(dtype);
    const Tensor cpu = (randn({7, 5}, {}, &test::rng()) * 4.0).to(dtype);
    const Tensor there = cpu.to(gpu());
    CHECK(there.device() == gpu());
    test::check_matches_cpu(there, cpu, 0.0);
    test::check_matches_cpu(cpu.t().to(gpu()), cpu.t().contiguous(), 0.0);
    CHECK(test::values(there.t().to(Device::cpu())) == test::values(cpu.t()));
  }
}

TEST_CASE("copy_ converts dtypes and broadcasts across devices") {
  const Tensor source = randn({1, 6}, {}, &test::rng());
  Tensor on_gpu = zeros({4, 6}, {DType::f16, gpu()});
  on_gpu.copy_(source);
  Tensor expected = zeros({4, 6}, {DType::f16});
  expected.copy_(source);
  test::check_matches_cpu(on_gpu, expected, 0.0);
  Tensor back = zeros({4, 6}, {DType::f64});
  back.copy_(on_gpu);
  CHECK(test::values(back) == test::values(expected));
}

TEST_CASE("item() of a GPU tensor reads the value back") {
  const Tensor t = full({1}, 2.5, {DType::f32, gpu()});
  CHECK(t.item() == 2.5);
}

TEST_CASE("the caching allocator reuses a freed block and counts it") {
  cuda::empty_cache();
  const cuda::MemoryStats before = cuda::memory_stats(0);
  { Tensor t = empty({1000, 1000}, {DType::f32, gpu()}); }
  { Tensor t = empty({1000, 1000}, {DType::f32, gpu()}); }
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.allocations - before.allocations == 2);
  CHECK(after.cache_hits - before.cache_hits == 1);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  cuda::empty_cache();
  CHECK(cuda::memory_stats(0).reserved_bytes == cuda::memory_stats(0).allocated_bytes);
}

TEST_CASE("a device index past the last GPU is an error naming it") {
  CHECK_THROWS_WITH_AS(zeros({2}, {DType::f32, Device::cuda(cuda::device_count())}),
                       doctest::Contains("there is no device"), Error);
}

TEST_CASE("events: a recorded event is passed after synchronize, and times the work between two") {
  cuda::Event start(true), stop(true);
  start.record();
  Tensor x = randn({512, 512}, {}, &test::rng()).to(gpu());
  for (int i = 0; i < 10; ++i) x = x.matmul(x) * 1e-3;
  stop.record();
  stop.synchronize();
  CHECK(stop.query());
  CHECK(start.elapsed_ms(stop) >= 0.0);
}
