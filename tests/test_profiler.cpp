// profiler::Profile, RecordScope and their reports: what is recorded (kernels with their input
// shapes, backward nodes, allocations, optimizer steps, loader waits), how events nest and self
// times add up, the Chrome trace, and that nothing is recorded with no Profile alive. No test
// asserts on how long anything took, only on how times relate.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
using profiler::Category;
using profiler::Event;

namespace {

std::vector<const Event*> named(const profiler::ProfileResult& result, const std::string& name) {
  std::vector<const Event*> found;
  for (const Event& event : result.events)
    if (event.name == name) found.push_back(&event);
  return found;
}

// `inner` ran inside `outer` on the same thread.
bool nested_in(const Event& inner, const Event& outer) {
  return inner.thread == outer.thread && inner.depth > outer.depth && inner.start_ns >= outer.start_ns &&
         inner.end_ns <= outer.end_ns;
}

Event span(int thread, int depth, int64_t start, int64_t end) {
  Event event;
  event.start_ns = start;
  event.end_ns = end;
  event.thread = thread;
  event.depth = depth;
  return event;
}

}  // namespace

TEST_CASE("self time is the duration less the children's on the same thread") {
  // Thread 0: a [0, 100] holding b [10, 30] (holding c [12, 20]) and d [40, 90]; thread 1: e [0, 50]
  // overlapping a in time but not its child. f [200, 210] at depth 1 lost its parent (begun before
  // the Profile) and must not be charged to a.
  const std::vector<Event> events = {span(0, 2, 12, 20), span(0, 1, 10, 30), span(0, 1, 40, 90),
                                     span(0, 0, 0, 100), span(1, 0, 0, 50),  span(0, 1, 200, 210)};
  CHECK(profiler::self_times_ns(events) == std::vector<int64_t>{8, 12, 50, 30, 50, 10});
}

TEST_CASE("a planted workload of scopes and ops nests, and the self times add up to the outer scope") {
  const Tensor a = randn({8, 16}, {}, &test::rng()), b = randn({16, 4}, {}, &test::rng());
  profiler::Profile profile;
  {
    const profiler::RecordScope outer("outer", Category::user);
    const Tensor product = mm(a, b);
    {
      const profiler::RecordScope inner("inner", Category::user);
      const Tensor activated = relu(product + 1.0);
    }
  }
  profile.stop();
  const profiler::ProfileResult& result = profile.result();
  REQUIRE(named(result, "outer").size() == 1);
  REQUIRE(named(result, "inner").size() == 1);
  REQUIRE(named(result, "gemm").size() == 1);
  const Event &outer = *named(result, "outer")[0], &inner = *named(result, "inner")[0];
  const Event& gemm = *named(result, "gemm")[0];
  CHECK(gemm.category == Category::gemm);
  CHECK(gemm.input_shapes == std::vector<Shape>{{8, 16}, {16, 4}});
  CHECK(nested_in(gemm, outer));
  CHECK(!nested_in(gemm, inner));
  CHECK(inner.depth == outer.depth + 1);
  for (const char* op : {"add", "relu"}) {
    INFO(op);
    REQUIRE(named(result, op).size() == 1);
    CHECK(nested_in(*named(result, op)[0], inner));
  }

  // Every event of the thread ran inside "outer", so their self times add up to its duration
  // exactly, and each event's self time plus its direct children's durations is its duration.
  const profiler::KeyAverages averages = profiler::key_averages(result);
  CHECK(averages.profiling_thread_self_ns == outer.duration_ns());
  CHECK(averages.self_total_ns == outer.duration_ns());
  CHECK(averages.wall_ns >= outer.duration_ns());
  const auto row = [&](const std::string& name) {
    const auto it = std::find_if(averages.rows.begin(), averages.rows.end(),
                                 [&](const profiler::KeyAverage& r) { return r.name == name; });
    REQUIRE(it != averages.rows.end());
    return *it;
  };
  CHECK(row("outer").total_ns == outer.duration_ns());
  int64_t inner_children_ns = 0;
  for (const Event& event : result.events)
    if (nested_in(event, inner) && event.depth == inner.depth + 1) inner_children_ns += event.duration_ns();
  CHECK(row("inner").self_ns == inner.duration_ns() - inner_children_ns);
  CHECK(row("gemm").calls == 1);
  CHECK(std::is_sorted(averages.rows.begin(), averages.rows.end(),
                       [](const auto& x, const auto& y) { return x.self_ns > y.self_ns; }));
  const std::string table = averages.table();
  CHECK(test::contains(table, "outer"));
  CHECK(test::contains(table, "Profiled wall time"));
}

TEST_CASE("with no Profile alive nothing is recorded, and a Profile keeps only what began and ended in its life") {
  const Tensor x = randn({4, 4}, {}, &test::rng());
  CHECK(!profiler::is_enabled());
  const Tensor unprofiled = mm(x, x);
  profiler::Profile first;
  CHECK(profiler::is_enabled());
  const Tensor profiled = mm(x, x);
  std::optional<profiler::RecordScope> straddling;
  straddling.emplace("begun in the first Profile, ended after it", Category::user);
  first.stop();
  CHECK(!profiler::is_enabled());
  const Tensor off = mm(x, x) + 1.0;
  const auto open_before = std::make_unique<profiler::RecordScope>("begun with no Profile", Category::user);
  profiler::Profile second;
  const Tensor sum = x + x;  // this thread records into the second Profile from here
  straddling.reset();        // ends in the second Profile, but began in the first: dropped
  second.stop();

  CHECK(named(first.result(), "gemm").size() == 1);
  CHECK(named(first.result(), "begun in the first Profile, ended after it").empty());
  CHECK(named(first.result(), "add").empty());
  for (const Event& event : second.result().events) {
    INFO(event.name);
    CHECK((event.name == "add" || event.name == "[memory]"));
  }
  CHECK(named(second.result(), "add").size() == 1);
}

TEST_CASE("a second Profile while one is alive is refused") {
  profiler::Profile first;
  CHECK_THROWS_WITH_AS(profiler::Profile(), doctest::Contains("another Profile is alive"), Error);
  first.stop();
  profiler::Profile second;  // the first one stopped: allowed
}

TEST_CASE("allocations are recorded with their bytes and charged to the innermost scope") {
  profiler::Profile profile;
  {
    const profiler::RecordScope scope("allocating", Category::user);
    const Tensor t = empty({256}, {DType::f32});
    const Tensor u = empty({3, 5}, {DType::f64});
  }
  profile.stop();
  const profiler::ProfileResult& result = profile.result();
  const auto memory = named(result, "[memory]");
  REQUIRE(memory.size() == 2);
  CHECK(memory[0]->category == Category::allocation);
  CHECK(memory[0]->bytes + memory[1]->bytes == 1024 + 120);
  CHECK(named(result, "allocating")[0]->allocated_bytes == 1024 + 120);
  const profiler::KeyAverages averages = profiler::key_averages(result);
  for (const profiler::KeyAverage& row : averages.rows) {
    INFO(row.name);
    if (row.name == "[memory]") CHECK((row.calls == 2 && row.allocated_bytes == 1144 && row.self_ns == 0));
    if (row.name == "allocating") CHECK(row.allocated_bytes == 1144);
  }
}

TEST_CASE("a backward records the engine pass and each node it runs, with the node's kernels inside") {
  const Tensor x = test::rand_input({5, 3}), w = test::rand_input({3, 2});
  const Tensor loss = mm(x, w).sum();
  profiler::Profile profile;
  loss.backward();
  profile.stop();
  const profiler::ProfileResult& result = profile.result();
  REQUIRE(named(result, "backward").size() == 1);
  REQUIRE(named(result, "MmBackward").size() == 1);
  REQUIRE(named(result, "SumBackward").size() == 1);
  const Event& node = *named(result, "MmBackward")[0];
  CHECK(node.category == Category::backward);
  CHECK(node.input_shapes == std::vector<Shape>{{5, 2}});  // the gradient it received
  CHECK(nested_in(node, *named(result, "backward")[0]));
  // dx = g w^T and dw = x^T g: two GEMMs, both inside the node.
  const auto gemms = named(result, "gemm");
  REQUIRE(gemms.size() == 2);
  for (const Event* gemm : gemms) CHECK(nested_in(*gemm, node));
}

TEST_CASE("an optimizer step and the loader's batches are recorded") {
  auto data = std::make_shared<data::TensorDataset>(randn({12, 3}, {}, &test::rng()), randn({12}, {}, &test::rng()));
  data::DataLoader loader(data, {.batch_size = 4});
  const Tensor w = test::rand_input({3});
  optim::Adam adam({w}, {});
  profiler::Profile profile;
  for (const data::Batch& batch : loader) {
    adam.zero_grad();
    matmul(batch.input.to(DType::f64), w).sum().backward();
    adam.step();
  }
  profile.stop();
  const profiler::ProfileResult& result = profile.result();
  // One wait per batch, and the last one that finds the end of the pass.
  CHECK(named(result, "DataLoader.next").size() == 4);
  const auto steps = named(result, "Adam.step");
  REQUIRE(steps.size() == 3);
  CHECK(steps[0]->category == Category::optimizer);
  const auto kernels = named(result, "adam_step");
  REQUIRE(kernels.size() == 3);
  for (const Event* kernel : kernels)
    CHECK(std::any_of(steps.begin(), steps.end(), [&](const Event* step) { return nested_in(*kernel, *step); }));
}

TEST_CASE("the Chrome trace is JSON with one named row per thread and each op's name, category and shapes") {
  const Tensor a = randn({2, 3}, {}, &test::rng()), b = randn({3, 4}, {}, &test::rng());
  profiler::Profile profile;
  const Tensor product = mm(a, b);
  std::thread helper([] {
    profiler::set_thread_name("helper");
    const profiler::RecordScope scope("on the helper", Category::user);
  });
  helper.join();
  profile.stop();
  const nlohmann::json trace = nlohmann::json::parse(profiler::chrome_trace_json(profile.result(), 7, "rank 7"));
  std::map<std::string, nlohmann::json> by_name;
  std::map<int, std::string> thread_names;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    CHECK(event.at("pid") == 7);
    if (event.at("ph") == "M" && event.at("name") == "thread_name")
      thread_names[event.at("tid").get<int>()] = event.at("args").at("name");
    else if (event.at("ph") == "M") CHECK(event.at("args").at("name") == "rank 7");
    else by_name[event.at("name").get<std::string>()] = event;
  }
  REQUIRE(by_name.contains("gemm"));
  REQUIRE(by_name.contains("on the helper"));
  const nlohmann::json& gemm = by_name["gemm"];
  CHECK(gemm.at("ph") == "X");
  CHECK(gemm.at("cat") == "gemm");
  CHECK(gemm.at("args").at("input shapes") == nlohmann::json::parse("[[2, 3], [3, 4]]"));
  CHECK(gemm.at("dur").get<double>() >= 0.0);
  const int helper_tid = by_name["on the helper"].at("tid");
  CHECK(helper_tid != gemm.at("tid").get<int>());
  CHECK(thread_names[helper_tid] == "helper");
  CHECK(thread_names.contains(gemm.at("tid").get<int>()));
  REQUIRE(by_name.contains("[memory]"));  // mm's output
  CHECK(by_name["[memory]"].at("ph") == "i");
  CHECK(by_name["[memory]"].at("args").at("bytes") == 2 * 4 * 4);
}

TEST_CASE("StepProfiler records the steps after the skipped ones and writes the trace and the table") {
  test::TempDir dir;
  const Tensor x = randn({4, 4}, {}, &test::rng());
  {
    profiler::StepProfiler steps(dir.path() + "/profile", 0, 1, /*skip_steps=*/1, /*active_steps=*/2);
    for (int step = 1; step <= 4; ++step) {
      const profiler::RecordScope scope("step " + std::to_string(step), Category::user);
      const Tensor y = mm(x, x);
      steps.step();
    }
  }
  const std::string table = test::read_text(dir.path() + "/profile/key_averages.txt");
  const std::string trace = test::read_text(dir.path() + "/profile/trace.json");
  CHECK(test::contains(table, "gemm"));
  // The scope of a step closes after step() in it: step 1's began before the Profile, step 3's
  // ended after it stopped, so only step 2's is whole inside.
  CHECK(test::contains(table, "step 2"));
  for (const char* absent : {"step 1", "step 3", "step 4"}) CHECK(!test::contains(table, absent));
  CHECK(nlohmann::json::parse(trace).at("traceEvents").size() > 2);
}

TEST_CASE(
    "StepProfiler names its files by rank when the run has several processes and refuses a directory it cannot "
    "create") {
  test::TempDir dir;
  {
    profiler::StepProfiler steps(dir.path(), /*rank=*/3, /*world_size=*/4, /*skip_steps=*/0, /*active_steps=*/1);
    const Tensor y = randn({2}, {}, &test::rng()) + 1.0;
    steps.step();
  }
  const nlohmann::json trace = nlohmann::json::parse(test::read_text(dir.path() + "/trace_rank3.json"));
  CHECK(trace.at("traceEvents").at(0).at("pid") == 3);
  CHECK(test::contains(test::read_text(dir.path() + "/key_averages_rank3.txt"), "add"));

  std::ofstream(dir.path() + "/a_file") << "x";
  CHECK_THROWS_WITH_AS(profiler::StepProfiler(dir.path() + "/a_file/sub", 0, 1),
                       doctest::Contains("--profile: cannot create the directory"), Error);
}

TEST_CASE("the timeline picture draws each visible span as a bar in its thread's lane, with a legend") {
  profiler::ProfileResult result;
  result.start_ns = 0;
  result.end_ns = 1'000'000;  // 1 ms over 1030 pixels of plot
  result.threads = {{0, "main"}, {1, "loader <worker & 1>"}};
  Event gemm = span(0, 1, 100'000, 400'000), node = span(0, 0, 50'000, 500'000), wait = span(1, 0, 600'000, 900'000);
  gemm.category = Category::gemm;
  gemm.name = "gemm";
  node.category = Category::backward;
  node.name = "MmBackward";
  wait.category = Category::dataloader;
  wait.name = "DataLoader.next";
  Event tiny = span(0, 0, 950'000, 950'010);  // 0.01 pixels: left out
  tiny.category = Category::pointwise;
  Event allocation = span(0, 2, 200'000, 200'000);
  allocation.category = Category::allocation;
  result.events = {gemm, node, wait, tiny, allocation};
  const std::string svg = profiler::timeline_svg(result, "a planted run");
  auto count = [&](const std::string& part) {
    size_t n = 0;
    for (size_t at = svg.find(part); at != std::string::npos; at = svg.find(part, at + 1)) ++n;
    return n;
  };
  CHECK(count("<title>") == 3);  // gemm, MmBackward, DataLoader.next: not the tiny one, not the allocation
  CHECK(test::contains(svg, "<title>gemm 0.3 ms</title>"));
  CHECK(test::contains(svg, "x=\"253.0\""));  // gemm starts at 150 + 0.1 x 1030 pixels
  CHECK(test::contains(svg, "loader &lt;worker &amp; 1&gt;"));
  CHECK(!test::contains(svg, "<worker"));
  for (const char* kind : {">gemm</text>", ">backward</text>", ">dataloader</text>"}) CHECK(test::contains(svg, kind));
  CHECK(!test::contains(svg, ">pointwise</text>"));
  CHECK(test::contains(svg, ">1.0 ms</text>"));  // the axis ends at the Profile's length
}
