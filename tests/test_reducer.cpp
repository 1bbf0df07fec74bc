// DDP's reducer in one process: its buckets against an in-process fake process group
// (tests/fake_process_group.h), where every other rank contributes zeros, so an all-reduce with
// AVG halves a gradient on 2 ranks and the log shows each collective as it was issued. The
// argument checks that every ProcessGroup shares are tested here too.
#include "fake_process_group.h"
#include "helpers.h"

using namespace sg;

namespace {

// A leaf parameter of `shape` with random values.
Tensor parameter(const Shape& shape) { return randn(shape, {}, &test::rng()).requires_grad_(); }

// sum(w * (a * (b * (c * x)))): backward runs the last op first, so the gradients reach a first
// and c last — the reverse of the buckets' order when each of a, b, c has a bucket of its own.
struct Chain {
  Tensor a = parameter({4}), b = parameter({4}), c = parameter({4});
  Tensor x = randn({4}, {}, &test::rng()), w = randn({4}, {}, &test::rng());
  TensorList params() const { return {a, b, c}; }
  Tensor loss(const TensorList& p) const { return (w * (p[0] * (p[1] * (p[2] * x)))).sum(); }
  Tensor loss() const { return loss(params()); }

  // The gradients of one plain backward, without any reducer.
  TensorList local_gradients() const {
    TensorList copies;
    for (const Tensor& p : params()) copies.push_back(p.detach().clone().requires_grad_());
    loss(copies).backward();
    TensorList grads;
    for (const Tensor& copy : copies) grads.push_back(copy.grad());
    return grads;
  }
};

// Records the order of the buckets' "ready" events and how many collectives had been issued at each.
struct ReadyLog final : dist::ReducerObserver {
  explicit ReadyLog(const test::FakeProcessGroup& group) : group(group) {}
  void bucket_ready(size_t bucket) override { ready.push_back({bucket, group.calls().size()}); }
  const test::FakeProcessGroup& group;
  std::vector<std::pair<size_t, size_t>> ready;  // (bucket, collectives issued before it)
};

std::shared_ptr<dist::Reducer> make_reducer(const TensorList& params, dist::ProcessGroup& group, size_t cap_bytes,
                                            bool find_unused = false) {
  std::vector<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) names.push_back(detail::concat("p", i));
  auto reducer = std::make_shared<dist::Reducer>(params, names, group, cap_bytes, find_unused);
  reducer->install_hooks();
  return reducer;
}

bool is_view_of(const Tensor& grad, const Tensor& buffer) { return grad.storage() == buffer.storage(); }

}  // namespace

TEST_CASE("assign_buckets: filled in registration order, per dtype, closed at the limit, returned last first") {
  const TensorList params{zeros({10}), zeros({4}), zeros({3}, {DType::f64}), zeros({100}), zeros({2})};
  // 64 bytes: p0 (40 B) stays open, p1 brings the f32 bucket to 56 B, p3 (400 B) closes it at
  // 456; p2 is f64 and waits alone; p4 opens a new f32 bucket.
  CHECK(dist::assign_buckets(params, 64) == std::vector<std::vector<size_t>>{{4}, {2}, {0, 1, 3}});
  CHECK(dist::assign_buckets(params, 1 << 20) == std::vector<std::vector<size_t>>{{2}, {0, 1, 3, 4}});
}

TEST_CASE("assign_buckets: the first bucket closes at 1 MiB, so little is left to send after backward") {
  // 0.5 MiB each: the first two registered fill the 1 MiB first bucket, the next four a 2 MiB
  // one, the last two stay in an open one, which backward fills first.
  const TensorList params(8, zeros({1 << 17}));
  const std::vector<std::vector<size_t>> expected{{6, 7}, {2, 3, 4, 5}, {0, 1}};
  CHECK(dist::assign_buckets(params, 2 << 20) == expected);
}

TEST_CASE("Reducer: buckets filled in reverse are all-reduced once each, in bucket order, after the last fills") {
  Chain chain;
  const TensorList expected = chain.local_gradients();
  test::FakeProcessGroup group(0, 2);
  auto reducer = make_reducer(chain.params(), group, 1);  // one parameter per bucket: c, b, a
  auto ready = std::make_shared<ReadyLog>(group);
  reducer->set_observer(ready);

  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    const size_t before = group.calls().size();
    reducer->prepare_for_backward(true);
    chain.loss().backward();
    // a (bucket 2) is ready first, c (bucket 0) last; nothing may go out before bucket 0 does.
    const std::vector<std::pair<size_t, size_t>> ready_order{{2, before}, {1, before}, {0, before}};
    CHECK(ready->ready == ready_order);
    REQUIRE(group.calls().size() == before + 3);
    for (size_t b = 0; b < 3; ++b) {
      CAPTURE(b);
      const auto& call = group.calls()[before + b];
      CHECK(call.op == "all_reduce");
      CHECK(call.reduce_op == dist::ReduceOp::AVG);
      CHECK(call.tensor.is_same(reducer->buckets()[b].buffer));
    }
    // The average over 2 ranks, the other holding zeros: half of this rank's gradient.
    for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(chain.params()[i].grad(), expected[i] * 0.5) < 1e-6);
    ready->ready.clear();
    for (Tensor p : chain.params()) p.set_grad(Tensor());
  }
}

TEST_CASE("Reducer: each .grad is a view into its bucket, kept by zero_grad(set_to_none = false) and load_state_dict") {
  Generator generator(3);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 5, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(5, 3, true, &generator)});
  auto reference = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 5), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(5, 3)});
  reference->load_state_dict(model->state_dict());
  test::FakeProcessGroup group(0, 1);  // one rank: the average is the gradient itself
  dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.00005}, &group);  // 52 bytes: several buckets
  REQUIRE(ddp.reducer().buckets().size() > 1);
  optim::SGD optimizer(ddp.parameters(), {.lr = 0.1});
  optim::SGD reference_optimizer(reference->parameters(), {.lr = 0.1});

  // Each parameter's bucket view, found from the buckets' layout.
  const TensorList params = ddp.parameters();
  std::vector<const Tensor*> views(params.size());
  for (const dist::Bucket& bucket : ddp.reducer().buckets())
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) views[bucket.params[slot]] = &bucket.views[slot];
  const auto check_grads_are_views = [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      CHECK(params[i].grad().is_same(*views[i]));
    }
  };
  const auto step = [&](int n, bool set_to_none) {
    const Tensor x = randn({8, 6}, {}, &generator), y = randn({8, 3}, {}, &generator);
    optimizer.zero_grad(set_to_none);
    reference_optimizer.zero_grad(set_to_none);
    nn::functional::mse_loss(ddp(x), y).backward();
    nn::functional::mse_loss((*reference)(x), y).backward();
    CAPTURE(n);
    check_grads_are_views();
    const TensorList reference_params = reference->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      CHECK(test::max_abs_diff(params[i].grad(), reference_params[i].grad()) == 0);
    optimizer.step();
    reference_optimizer.step();
  };

  step(0, true);   // .grad undefined before: the fresh gradient is copied in and .grad pointed at the view
  step(1, false);  // zeroed in place: backward accumulates straight into the bucket
  step(2, false);
  nn::StateDict moved;  // other weights, as a checkpoint would bring
  for (const auto& [name, value] : reference->state_dict()) moved[name] = value + randn(value.sizes(), {}, &generator);
  model->load_state_dict(moved);
  reference->load_state_dict(moved);
  check_grads_are_views();
  step(3, false);
  step(4, true);
  const nn::StateDict got = model->state_dict(), want = reference->state_dict();
  for (const auto& [name, value] : want) CHECK(test::max_abs_diff(got.at(name), value) == 0);
}

TEST_CASE("Reducer with find_unused_parameters: an unused parameter keeps no gradient, its bucket still goes once") {
  Tensor used = parameter({3}), unused = parameter({2});
  const Tensor x = randn({3}, {}, &test::rng());
  test::FakeProcessGroup group(0, 2);
  auto reducer = make_reducer({used, unused}, group, 1 << 20, /*find_unused=*/true);  // one bucket
  reducer->prepare_for_backward(true);
  (used * x).sum().backward();
  REQUIRE(group.calls().size() == 2);
  CHECK(group.calls()[0].tensor.is_same(reducer->buckets()[0].buffer));
  CHECK(group.calls()[0].reduce_op == dist::ReduceOp::AVG);
  CHECK(group.calls()[1].reduce_op == dist::ReduceOp::MAX);  // which parameters hold a gradient anywhere
  CHECK_FALSE(unused.grad().defined());
  CHECK(test::max_abs_diff(used.grad(), x * 0.5) < 1e-6);

  // A gradient the unused parameter holds already (accumulated under no_sync, say) takes part.
  const Tensor held = randn({2}, {}, &test::rng());
  unused.set_grad(held.clone());
  used.set_grad(Tensor());
  reducer->prepare_for_backward(true);
  (used * x).sum().backward();
  CHECK(is_view_of(unused.grad(), reducer->buckets()[0].buffer));
  CHECK(test::max_abs_diff(unused.grad(), held * 0.5) < 1e-6);
}

TEST_CASE("Reducer without find_unused_parameters: a parameter with no gradient is an error naming it") {
  Tensor used = parameter({3}), unused = parameter({2});
  test::FakeProcessGroup group(0, 2);
  auto reducer = make_reducer({used, unused}, group, 1 << 20);
  reducer->prepare_for_backward(true);
  CHECK_THROWS_WITH_AS((used * 2.0).sum().backward(),
                       doctest::Contains("1 parameter(s) received no gradient in this backward: 'p1'"), Error);
}

TEST_CASE("Reducer under no_sync: no collective, then the next synchronised backward averages the accumulated sum") {
  Chain chain;
  const TensorList once = chain.local_gradients();
  test::FakeProcessGroup group(0, 2);
  auto reducer = make_reducer(chain.params(), group, 1 << 20);
  reducer->prepare_for_backward(false);
  chain.loss().backward();
  CHECK(group.calls().empty());
  for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(chain.params()[i].grad(), once[i]) < 1e-6);
  reducer->prepare_for_backward(true);
  chain.loss().backward();
  CHECK(group.calls().size() == 1);
  for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(chain.params()[i].grad(), once[i]) < 1e-6);  // (2g) / 2
}

TEST_CASE("a reducer holds the average of a synchronised backward, not local gradients") {
  Chain chain;
  test::FakeProcessGroup group(0, 2);
  auto reducer = make_reducer(chain.params(), group, 1);
  CHECK_FALSE(reducer->holds_average(chain.params()[0].grad()));  // no backward yet
  reducer->prepare_for_backward(true);
  chain.loss().backward();
  TensorList grads;
  for (const Tensor& p : chain.params()) grads.push_back(p.grad());
  for (const Tensor& grad : grads) CHECK(reducer->holds_average(grad));
  CHECK_FALSE(reducer->holds_average(zeros({4})));  // a gradient outside the buckets
  reducer->prepare_for_backward(false);             // a no_sync step: local sums
  chain.loss().backward();
  for (const Tensor& grad : grads) CHECK_FALSE(reducer->holds_average(grad));
}

TEST_CASE("ProcessGroup checks the arguments of every backend's collectives before the backend sees them") {
  test::FakeProcessGroup group(0, 2);
  Tensor ok = zeros({4});
  Tensor undefined;
  Tensor strided = zeros({4, 2}).t();
  Tensor flags = zeros({2}, {DType::boolean});
  std::vector<Tensor> one_output{zeros({4})}, wrong_shape{zeros({4}), zeros({5})};
  CHECK_THROWS_WITH_AS(group.all_reduce(undefined),
                       doctest::Contains("FakeProcessGroup::all_reduce: tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(group.all_reduce(strided),
                       doctest::Contains("FakeProcessGroup::all_reduce: tensor of shape [2, 4] must be contiguous"),
                       Error);
  CHECK_THROWS_WITH_AS(group.all_reduce(flags, dist::ReduceOp::AVG),
                       doctest::Contains("FakeProcessGroup::all_reduce: AVG is not defined for bool tensors"), Error);
  CHECK_THROWS_WITH_AS(group.broadcast(ok, 2),
                       doctest::Contains("FakeProcessGroup::broadcast: root 2 is not a rank of this group of 2"),
                       Error);
  CHECK_THROWS_WITH_AS(
      group.all_gather(one_output, ok),
      doctest::Contains("FakeProcessGroup::all_gather: expected 2 output tensors (one per rank), got 1"), Error);
  CHECK_THROWS_WITH_AS(group.gather(wrong_shape, ok, 0),
                       doctest::Contains("FakeProcessGroup::gather: output 1 is f32[5] but must match f32[4]"), Error);
  CHECK_THROWS_WITH_AS(group.scatter(ok, one_output, 0),
                       doctest::Contains("FakeProcessGroup::scatter: expected 2 input tensors (one per rank), got 1"),
                       Error);
  CHECK(group.calls().empty());
  group.gather(one_output, ok, 1);  // the outputs matter on the root only
  CHECK(group.calls().size() == 1);
}

TEST_CASE("the flat reduce_scatter_tensor and all_gather_into_tensor check their chunk sizes and dtypes") {
  test::FakeProcessGroup group(1, 3);
  Tensor chunk = zeros({4});
  Tensor whole = zeros({12}), too_short = zeros({11}), doubles = zeros({12}, {DType::f64});
  Tensor strided = zeros({6, 2}).t();
  CHECK_THROWS_WITH_AS(group.reduce_scatter_tensor(chunk, too_short),
                       doctest::Contains("FakeProcessGroup::reduce_scatter_tensor: input f32[11] has 11 elements but "
                                         "must have size() x output's = 3 x 4 = 12"),
                       Error);
  CHECK_THROWS_WITH_AS(group.reduce_scatter_tensor(chunk, doubles),
                       doctest::Contains("reduce_scatter_tensor: input is f64 but output is f32; they must match"),
                       Error);
  CHECK_THROWS_WITH_AS(group.reduce_scatter_tensor(chunk, strided),
                       doctest::Contains("reduce_scatter_tensor: input of shape [2, 6] must be contiguous"), Error);
  Tensor flags = zeros({3}, {DType::boolean}), flag = zeros({1}, {DType::boolean});
  CHECK_THROWS_WITH_AS(group.reduce_scatter_tensor(flag, flags, dist::ReduceOp::AVG),
                       doctest::Contains("reduce_scatter_tensor: AVG is not defined for bool tensors"), Error);
  CHECK_THROWS_WITH_AS(group.all_gather_into_tensor(too_short, chunk),
                       doctest::Contains("FakeProcessGroup::all_gather_into_tensor: output f32[11] has 11 elements "
                                         "but must have size() x input's = 3 x 4 = 12"),
                       Error);
  Tensor undefined;
  CHECK_THROWS_WITH_AS(group.all_gather_into_tensor(whole, undefined),
                       doctest::Contains("FakeProcessGroup::all_gather_into_tensor: input is undefined"), Error);
  CHECK(group.calls().empty());

  // Rank 1 of 3 with the others' zeros: chunk 1 of the input, and the input in slot 1.
  const Tensor input = test::rand_input({12}).detach().to(DType::f32);
  group.reduce_scatter_tensor(chunk, input)->wait();
  CHECK(test::max_abs_diff(chunk, input.view({3, 4}).select(0, 1)) == 0);
  group.all_gather_into_tensor(whole, chunk)->wait();
  CHECK(test::max_abs_diff(whole.view({3, 4}).select(0, 1), chunk) == 0);
  CHECK(test::max_abs_diff(whole.view({3, 4}).select(0, 0), zeros({4})) == 0);
}
