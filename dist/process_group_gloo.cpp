#include "dist/process_group_gloo.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include "core/factory.h"
#include "core/profiler.h"
#include "dist/environment.h"
#include "dist/hierarchical_all_reduce.h"
#include "dist/shm_all_reduce.h"
#include "dist/tcp_store.h"

namespace sg::dist {

namespace {

using ReduceFunction = std::function<void(void*, const void*, const void*, size_t)>;

#if defined(__F16C__)
// c[i] = a[i] + b[i] for f16, eight at a time through the CPU's f16 <-> f32 conversions: the bits
// of the scalar loop in reduce_function (both round to nearest, ties to even), several times
// faster than its conversions in software, which are otherwise most of an f16 all-reduce's time
// (DDP's fp16_compress_hook sums f16 buckets: docs/ddp.md).
void add_halves(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 sum = _mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))),
                                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = float_to_half_bits(half_bits_to_float(x[i]) + half_bits_to_float(y[i]));
}
#endif

// c[i] = a[i] (op) b[i] over n elements. f16/bf16 combine in f32 and round once per step, as a
// GPU's all-reduce does. On bool, SUM and MAX are "or", PRODUCT and MIN are "and" (PyTorch's).
template <typename T>
ReduceFunction reduce_function(ReduceOp op) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, Half>)
    if (op == ReduceOp::SUM || op == ReduceOp::AVG) return add_halves;
#endif
  const auto elementwise = [](auto combine) -> ReduceFunction {
    return [combine](void* c, const void* a, const void* b, size_t n) {
      T* out = static_cast<T*>(c);
      const T* x = static_cast<const T*>(a);
      const T* y = static_cast<const T*>(b);
      for (size_t i = 0; i < n; ++i) out[i] = combine(x[i], y[i]);
    };
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (op == ReduceOp::SUM || op == ReduceOp::MAX) return elementwise([](bool x, bool y) { return x || y; });
    return elementwise([](bool x, bool y) { return x && y; });
  } else {
    using Math = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: return elementwise([](T x, T y) { return T(static_cast<Math>(x) + static_cast<Math>(y)); });
      case ReduceOp::PRODUCT:
        return elementwise([](T x, T y) { return T(static_cast<Math>(x) * static_cast<Math>(y)); });
      case ReduceOp::MIN:
        return elementwise([](T x, T y) { return static_cast<Math>(y) < static_cast<Math>(x) ? y : x; });
      case ReduceOp::MAX:
        return elementwise([](T x, T y) { return static_cast<Math>(y) > static_cast<Math>(x) ? y : x; });
    }
    return nullptr;
  }
}

// AVG = SUM / size; integers divide with truncation.
template <typename T>
void divide_in_place(T* data, int64_t n, int divisor) {
  using Math = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  for (int64_t i = 0; i < n; ++i) data[i] = T(static_cast<Math>(data[i]) / static_cast<Math>(divisor));
}

// AVG's division by the group size, for a reduction to finish with (SharedMemoryAllReduce's
// FinishFunction); empty for the other ops.
template <typename T>
SharedMemoryAllReduce::FinishFunction division_for(ReduceOp op, int world) {
  if constexpr (std::is_same_v<T, bool>) return {};
  else if (op != ReduceOp::AVG) return {};
  else return [world](void* data, size_t n) { divide_in_place(static_cast<T*>(data), static_cast<int64_t>(n), world); };
}

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.raw_data()); }
size_t nbytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Gloo's rendezvous reads and writes the ranks' addresses through its own Store interface; the
// job's TcpStore answers it. (TcpStore does not derive from Gloo's interface, so no header of ours
// brings Gloo's with it: Gloo is a private dependency of the library.)
class GlooStore final : public gloo::rendezvous::Store {
public:
  explicit GlooStore(TcpStore& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

private:
  TcpStore& store_;
};

// Note [The address Gloo binds]
// Each rank's Gloo pairs listen on one address that every other rank must reach. The machine's
// name is no good: Debian maps it to 127.0.1.1 in /etc/hosts, so ranks on other machines would be
// told to connect to their own loopback. The address this rank's store connection leaves from is
// right by construction: the kernel chose it as the route to MASTER_ADDR, which every rank reaches
// (loopback when the whole job is on this machine). GLOO_SOCKET_IFNAME still picks an interface
// by name, as with PyTorch.
std::shared_ptr<gloo::transport::Device> make_device(const TcpStore& store) {
  gloo::transport::tcp::attr attr;
  if (const auto iface = gloo_interface_from_environment()) attr.iface = *iface;
  else attr.hostname = store.local_address();
  return gloo::transport::tcp::CreateDevice(attr);
}

// A Gloo context of `size` ranks, this one `rank`, that meet through the keys of `store` under
// `key_prefix`: the group's own, and the leaders' of the hierarchical all-reduce.
std::shared_ptr<gloo::Context> connect_gloo(TcpStore& store, const std::string& key_prefix, int rank, int size,
                                            std::chrono::milliseconds timeout) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // Before connecting: Gloo's pairs keep the timeout they were connected with (its old-style
  // algorithms read the pair's, frozen at connectFullMesh).
  context->setTimeout(timeout);
  GlooStore gloo_store(store);
  gloo::rendezvous::PrefixStore prefixed(key_prefix, gloo_store);
  auto device = make_device(store);
  context->connectFullMesh(prefixed, device);
  return context;
}

template <typename T>
void gloo_all_reduce(const std::shared_ptr<gloo::Context>& context, const Tensor& t, ReduceOp op, uint32_t tag,
                     std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions options(context);
  options.setOutput(static_cast<T*>(t.raw_data()), static_cast<size_t>(t.numel()));
  options.setReduceFunction(reduce_function<T>(op));
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allreduce(options);
}

}  // namespace

class ProcessGroupGloo::GlooWork final : public Work {
public:
  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_changed_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  Timing timing() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return timing_;
  }
  void finish(std::exception_ptr error, Timing timing) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
      error_ = std::move(error);
      timing_ = timing;
    }
    done_changed_.notify_all();
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
  Timing timing_;
};

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<TcpStore> store, int rank, int size,
                                   std::chrono::milliseconds timeout, bool debug)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      debug_(debug) {
  const auto connect_context = [&](const std::string& key_prefix, int rank_there, int size_there, const char* whom) {
    try {
      return connect_gloo(*store_, key_prefix, rank_there, size_there, timeout);
    } catch (const std::exception& e) {
      SG_FAIL("ProcessGroupGloo (rank ", rank, " of ", size, "): connecting to ", whom, " failed: ", e.what());
    }
  };
  context_ = connect_context("gloo", rank, size, "the other ranks");
  if (size > 1) {
    SharedMemoryAllReduce::Unavailable why_not;
    const bool shared_memory_enabled = shared_memory_all_reduce_from_environment();
    shared_memory_ = SharedMemoryAllReduce::connect(*store_, rank, size, shared_memory_enabled, why_not);
    // why_not is the same on every rank, so they all take part in this collective setup or none does.
    if (!shared_memory_ && !why_not.is_failure)
      hierarchical_ = HierarchicalAllReduce::connect(
          *store_, rank, size, shared_memory_enabled && hierarchical_all_reduce_from_environment(),
          [&](const std::string& key_prefix, int leader, int leaders) {
            return connect_context(key_prefix, leader, leaders, "the other machines' leaders");
          },
          why_not);
    if (rank == 0 && why_not.is_failure)
      std::fprintf(stderr, "ProcessGroupGloo: all_reduce goes through Gloo's TCP: no shared memory (%s)\n",
                   why_not.reason.c_str());
  }
  communication_thread_ = std::thread([this] { communication_loop(); });
}

ProcessGroupGloo::~ProcessGroupGloo() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  communication_thread_.join();  // runs what was queued first: a collective once issued completes or fails
}

void ProcessGroupGloo::set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

Tensor ProcessGroupGloo::zeros_for_all_reduce(int64_t numel, DType dtype) {
  if (!shared_memory_) return ProcessGroup::zeros_for_all_reduce(numel, dtype);
  std::string why_not;
  std::shared_ptr<char> memory =
      shared_memory_->allocate_shared(*store_, static_cast<size_t>(numel) * itemsize(dtype), why_not);
  if (!memory) {
    if (rank() == 0)
      std::fprintf(stderr,
                   "ProcessGroupGloo: a buffer all-reduced in place could not be shared (%s); it is copied "
                   "through the shared-memory segments instead\n",
                   why_not.c_str());
    return ProcessGroup::zeros_for_all_reduce(numel, dtype);
  }
  // The memory is fresh, so already zero; the tensor keeps it mapped as long as it lives.
  char* data = memory.get();
  return from_blob(data, {numel}, dtype, [keep = std::move(memory)](void*) {});
}

uint64_t ProcessGroupGloo::all_reduce_bytes_in_place() const {
  return shared_memory_ ? shared_memory_->bytes_reduced_in_place() : 0;
}

ProcessGroupGloo::AllReducePath ProcessGroupGloo::all_reduce_path() const {
  return shared_memory_  ? AllReducePath::shared_memory
         : hierarchical_ ? AllReducePath::hierarchical
                         : AllReducePath::gloo;
}

WorkPtr ProcessGroupGloo::enqueue(Description description, std::function<void(uint32_t tag)> run) {
  auto work = std::make_shared<GlooWork>();
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back({work, next_sequence_++, std::move(description), std::move(run)});
  }
  queue_changed_.notify_one();
  return work;
}

void ProcessGroupGloo::communication_loop() {
  profiler::set_thread_name("communication (rank " + std::to_string(rank()) + ")");
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    run_one(*job.work, job.sequence, job.description, job.run);
  }
}

void ProcessGroupGloo::run_one(GlooWork& work, int64_t sequence, const Description& description,
                               const std::function<void(uint32_t tag)>& run) {
  Work::Timing timing;
  timing.started = std::chrono::steady_clock::now();
  std::exception_ptr error;
  try {
    SG_CHECK(broken_.empty(), "ProcessGroupGloo (rank ", rank(), " of ", size(), "): ", description.str(sequence),
             " cannot run: the group failed earlier and is unusable:\n  ", broken_);
    try {
      // "rank r started #n", read back by diagnose_failure on the other ranks: in this rank's
      // shared-memory segment when the group has them (Note [Marks in the segments]).
      if (shared_memory_) shared_memory_->mark_started(sequence);
      else mark_started(*store_, rank(), sequence);
      if (debug_) check_fingerprints(sequence, description);
      run(tag_of(sequence));
    } catch (const sg::Error&) {
      throw;  // ours (e.g. the fingerprint mismatch) already says everything
    } catch (const std::exception& e) {
      broken_ = "rank " + std::to_string(rank()) + ": " + description.str(sequence) + " failed: " + e.what();
      SG_FAIL("ProcessGroupGloo (rank ", rank(), " of ", size(), "): ", description.str(sequence),
              " failed: ", e.what(), "\n  ", diagnose_failure(*store_, rank(), size(), sequence, started_reader()));
    }
  } catch (...) {
    error = std::current_exception();
  }
  timing.finished = std::chrono::steady_clock::now();
  profiler::record_span(description.op_name(), profiler::Category::collective, timing.started, timing.finished,
                        description.bytes());
  work.finish(error, timing);
}

std::function<int64_t(int)> ProcessGroupGloo::started_reader() const {
  if (!shared_memory_) return {};
  return [this](int r) { return shared_memory_->started(r); };
}

// SG_DIST_DEBUG (dist/collective_report.h): the fingerprints travel by a Gloo all-gather.
void ProcessGroupGloo::check_fingerprints(int64_t sequence, const Description& description) {
  std::vector<int64_t> mine = fingerprint(sequence, description);
  std::vector<int64_t> all(static_cast<size_t>(kFingerprintFields * size()));
  gloo::AllgatherOptions options(context_);
  options.setInput(mine.data(), mine.size());
  options.setOutput(all.data(), all.size());
  options.setTag(tag_of(sequence) ^ 0x80000000u);  // apart from the collective's own tag
  options.setTimeout(timeout_);
  gloo::allgather(options);
  dist::check_fingerprints(all, size(), sequence);
}

// On the communication thread: `t` all-reduced in place, through shared memory when every rank is
// on this machine, in three stages when the group spans machines with several ranks on one
// (dist/hierarchical_all_reduce.h), else through Gloo's TCP.
void ProcessGroupGloo::all_reduce_now(const Tensor& t, ReduceOp op, uint32_t tag, std::chrono::milliseconds timeout) {
  if (t.numel() == 0) return barrier_now(tag, timeout);
  SG_DISPATCH_ALL(t.dtype(), "all_reduce", [&]<typename T>() {
    const auto through_gloo = [&](const std::shared_ptr<gloo::Context>& context, std::chrono::milliseconds limit) {
      gloo_all_reduce<T>(context, t, op, tag, limit);
      all_reduce_bytes_through_gloo_ += nbytes_of(t);
    };
    // AVG divides the sum by the group size: through shared memory each slice's rank divides it
    // as it finishes it; on the other paths every rank divides the whole tensor afterwards.
    const SharedMemoryAllReduce::FinishFunction divide = division_for<T>(op, size());
    if (shared_memory_) {
      shared_memory_->all_reduce(t.raw_data(), static_cast<size_t>(t.numel()), sizeof(T), reduce_function<T>(op),
                                 timeout, divide);
      return;
    }
    if (hierarchical_)
      hierarchical_->all_reduce(t.raw_data(), static_cast<size_t>(t.numel()), sizeof(T), reduce_function<T>(op),
                                through_gloo, timeout);
    else through_gloo(context_, timeout);
    if (divide) divide(t.raw_data(), static_cast<size_t>(t.numel()));
  });
}

WorkPtr ProcessGroupGloo::start_all_reduce(Tensor& tensor, ReduceOp op) {
  Tensor t = tensor;
  const std::chrono::milliseconds timeout = timeout_;
  Description description{CollectiveOp::all_reduce, static_cast<int>(op), static_cast<int>(t.dtype()), -1, t.sizes()};
  return enqueue(description, [this, t, op, timeout](uint32_t tag) { all_reduce_now(t, op, tag, timeout); });
}

WorkPtr ProcessGroupGloo::start_broadcast(Tensor& tensor, int root) {
  Tensor t = tensor;
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::broadcast, -1, static_cast<int>(t.dtype()), root, t.sizes()},
                 [this, t, root, timeout](uint32_t tag) {
                   if (t.numel() == 0) return barrier_now(tag, timeout);
                   // Through shared memory when the group has it: DDP broadcasts the buffers every
                   // step, and Gloo's TCP costs each rank a few thread wake-ups per message.
                   if (shared_memory_) return shared_memory_->broadcast(bytes_of(t), nbytes_of(t), root, timeout);
                   gloo::BroadcastOptions options(context_);
                   options.setOutput(bytes_of(t), nbytes_of(t));
                   options.setRoot(root);
                   options.setTag(tag);
                   options.setTimeout(timeout);
                   gloo::broadcast(options);
                 });
}

WorkPtr ProcessGroupGloo::start_reduce(Tensor& tensor, int root, ReduceOp op) {
  Tensor t = tensor;
  const std::chrono::milliseconds timeout = timeout_;
  const int world = size();
  return enqueue({CollectiveOp::reduce, static_cast<int>(op), static_cast<int>(t.dtype()), root, t.sizes()},
                 [this, t, root, op, timeout, world](uint32_t tag) {
                   if (t.numel() == 0) return barrier_now(tag, timeout);
                   SG_DISPATCH_ALL(t.dtype(), "reduce", [&]<typename T>() {
                     gloo::ReduceOptions options(context_);
                     options.setOutput(static_cast<T*>(t.raw_data()), static_cast<size_t>(t.numel()));
                     options.setRoot(root);
                     options.setReduceFunction(reduce_function<T>(op));
                     options.setTag(tag);
                     options.setTimeout(timeout);
                     gloo::reduce(options);
                     if constexpr (!std::is_same_v<T, bool>)
                       if (op == ReduceOp::AVG && rank() == root)
                         divide_in_place(static_cast<T*>(t.raw_data()), t.numel(), world);
                   });
                 });
}

WorkPtr ProcessGroupGloo::start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  const Tensor in = input;
  const std::vector<Tensor> outs = outputs;
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::all_gather, -1, static_cast<int>(in.dtype()), -1, in.sizes()},
                 [this, in, outs, timeout](uint32_t tag) {
                   const size_t bytes = nbytes_of(in);
                   if (bytes == 0) return barrier_now(tag, timeout);
                   // Gloo gathers into one buffer of size() slots; the outputs may live anywhere.
                   std::vector<uint8_t> gathered(bytes * outs.size());
                   gloo::AllgatherOptions options(context_);
                   options.setInput(bytes_of(in), bytes);
                   options.setOutput(gathered.data(), gathered.size());
                   options.setTag(tag);
                   options.setTimeout(timeout);
                   gloo::allgather(options);
                   for (size_t r = 0; r < outs.size(); ++r)
                     std::memcpy(bytes_of(outs[r]), gathered.data() + r * bytes, bytes);
                 });
}

WorkPtr ProcessGroupGloo::start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  const Tensor in = input;
  const std::vector<Tensor> outs = rank() == root ? outputs : std::vector<Tensor>{};
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::gather, -1, static_cast<int>(in.dtype()), root, in.sizes()},
                 [this, in, outs, root, timeout](uint32_t tag) {
                   const size_t bytes = nbytes_of(in);
                   if (bytes == 0) return barrier_now(tag, timeout);
                   std::vector<uint8_t> gathered(rank() == root ? bytes * static_cast<size_t>(size()) : 0);
                   gloo::GatherOptions options(context_);
                   options.setInput(bytes_of(in), bytes);
                   if (rank() == root) options.setOutput(gathered.data(), gathered.size());
                   options.setRoot(root);
                   options.setTag(tag);
                   options.setTimeout(timeout);
                   gloo::gather(options);
                   for (size_t r = 0; r < outs.size(); ++r)
                     std::memcpy(bytes_of(outs[r]), gathered.data() + r * bytes, bytes);
                 });
}

WorkPtr ProcessGroupGloo::start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  const Tensor out = output;
  const std::vector<Tensor> ins = rank() == root ? inputs : std::vector<Tensor>{};
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::scatter, -1, static_cast<int>(out.dtype()), root, out.sizes()},
                 [this, out, ins, root, timeout](uint32_t tag) {
                   const size_t bytes = nbytes_of(out);
                   if (bytes == 0) return barrier_now(tag, timeout);
                   gloo::ScatterOptions options(context_);
                   std::vector<uint8_t*> pointers;
                   for (const Tensor& in : ins) pointers.push_back(bytes_of(in));
                   if (rank() == root) options.setInputs(pointers, bytes);
                   options.setOutput(bytes_of(out), bytes);
                   options.setRoot(root);
                   options.setTag(tag);
                   options.setTimeout(timeout);
                   gloo::scatter(options);
                 });
}

// Note [Gloo's reduce-scatter is an all-reduce]
// Gloo's own reduce-scatter (gloo/reduce_scatter.h) is an old-style algorithm object that takes
// Gloo's fixed reduction functions (no bool "or", no f16 rounding as here) and the timeout its
// pairs were connected with. So across machines the whole input is all-reduced — through the same
// path as all_reduce, so every dtype and op reduces alike — and each rank keeps its chunk: about
// twice a true reduce-scatter's bytes. On one machine the shared memory does a true one (each rank
// reduces its chunk only: SharedMemoryAllReduce::reduce_scatter), and all-gathers too.
WorkPtr ProcessGroupGloo::start_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  const Tensor out = output, in = input;
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue(
      {CollectiveOp::reduce_scatter_tensor, static_cast<int>(op), static_cast<int>(in.dtype()), -1, in.sizes()},
      [this, out, in, op, timeout](uint32_t tag) {
        const size_t bytes = nbytes_of(out);
        if (bytes == 0) return barrier_now(tag, timeout);
        if (shared_memory_) {  // each rank reduces only its chunk
          SG_DISPATCH_ALL(in.dtype(), "reduce_scatter_tensor", [&]<typename T>() {
            shared_memory_->reduce_scatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()), sizeof(T),
                                           reduce_function<T>(op), timeout, division_for<T>(op, size()));
          });
          return;
        }
        // Gloo has no reduce-scatter: all-reduce the whole input and keep our chunk.
        const Tensor reduced = empty({in.numel()}, {in.dtype(), Device::cpu()});
        std::memcpy(bytes_of(reduced), bytes_of(in), nbytes_of(in));
        all_reduce_now(reduced, op, tag, timeout);
        std::memcpy(bytes_of(out), bytes_of(reduced) + static_cast<size_t>(rank()) * bytes, bytes);
      });
}

WorkPtr ProcessGroupGloo::start_all_gather_into_tensor(Tensor& output, const Tensor& input) {
  const Tensor out = output, in = input;
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::all_gather_into_tensor, -1, static_cast<int>(in.dtype()), -1, in.sizes()},
                 [this, out, in, timeout](uint32_t tag) {
                   if (in.numel() == 0) return barrier_now(tag, timeout);
                   if (shared_memory_)
                     return shared_memory_->all_gather(in.raw_data(), out.raw_data(), nbytes_of(in), timeout);
                   gloo::AllgatherOptions options(context_);
                   options.setInput(bytes_of(in), nbytes_of(in));
                   options.setOutput(bytes_of(out), nbytes_of(out));
                   options.setTag(tag);
                   options.setTimeout(timeout);
                   gloo::allgather(options);
                 });
}

WorkPtr ProcessGroupGloo::start_barrier() {
  const std::chrono::milliseconds timeout = timeout_;
  return enqueue({CollectiveOp::barrier, -1, -1, -1, {}}, [this, timeout](uint32_t tag) { barrier_now(tag, timeout); });
}

// Note [A collective of nothing still waits]
// Gloo's algorithms send nothing for zero bytes and return at once, so a collective of an empty
// tensor would not wait for the other ranks, unlike the same call with data. Code that relies on
// a collective as a meeting point ("everyone has written", "now exit") would then race. So every
// collective with an empty payload is a barrier instead.
void ProcessGroupGloo::barrier_now(uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::BarrierOptions options(context_);
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::barrier(options);
}

}  // namespace sg::dist
