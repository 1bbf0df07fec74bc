// Note [NCCL streams, events and the watchdog]
// Every kernel of syncgrad runs on the compute stream (Note [One compute stream] in
// core/cuda_runtime/stream.h). A collective runs on this group's own NCCL stream instead, so that DDP's
// bucket all-reduces overlap the rest of backward, llm.c's way:
//   1. record an event `ready` on the compute stream: the tensors' values are final there;
//   2. the NCCL stream waits for `ready` (cudaStreamWaitEvent: the GPU waits, not the host);
//   3. the NCCL calls are queued on the NCCL stream, then an event `done` is recorded after them;
//   4. Work::wait() makes the compute stream wait for `done`: kernels queued after it see the
//      result, and the host goes on at once, as in PyTorch. barrier() alone blocks the host,
//      since that is what a barrier is for.
// The NCCL stream is created non-blocking: a blocking stream would be ordered with the legacy
// default stream (the compute stream) on every call and nothing would overlap.
// The Work keeps the tensors alive, and the watchdog keeps the Work until `done` has passed, so
// the caching allocator never hands out a block that the NCCL stream still reads or writes.
//
// NCCL calls return as soon as the work is queued; a collective that never completes (a rank
// that never reaches it, a dead peer) shows up nowhere on the host. So one watchdog thread per
// group polls the outstanding collectives: when one has run longer than the timeout, or NCCL
// reports an asynchronous error, it writes what failed (rank, op, sequence number, dtype, shape,
// bytes, and which ranks never got there) into every outstanding Work and the group, then calls
// ncclCommAbort, which makes the stuck kernels exit. wait() on any of those Works, and every
// later collective, throws that message. The watchdog also publishes how far this rank has
// issued in the store, which is what the other ranks' error messages read.
#include "dist/process_group_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/event.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "dist/collective_report.h"
#include "dist/cuda/nccl_check.h"
#include "dist/tcp_store.h"

namespace sg::dist {

namespace {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::u8:
    case DType::boolean: return ncclUint8;  // bool is one byte holding 0 or 1
  }
  return ncclUint8;
}

// On bool (bytes 0 and 1), SUM and MAX are "or" = the byte maximum, PRODUCT and MIN are "and" =
// the byte minimum, as in the Gloo group. ncclAvg divides the sum by the group size (integers:
// truncating, as the Gloo group; floating types multiply by 1/size before summing, so f16/bf16
// round a little differently from Gloo's sum-then-divide).
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  if (dtype == DType::boolean) return op == ReduceOp::SUM || op == ReduceOp::MAX ? ncclMax : ncclMin;
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::PRODUCT: return ncclProd;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
  }
  return ncclSum;
}

size_t nbytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

int next_group_index() {
  static std::atomic<int> groups{0};
  return groups++;
}

cudaEvent_t native(const cuda::Event& event) { return static_cast<cudaEvent_t>(event.handle()); }

// Whether the GPU has passed `event`. "Not ready" is an answer, not an error, but the runtime
// may also keep it as its last error, which the next launch check would then report: cleared
// here, as cuda::Event::query clears it.
cudaError_t query_event(const cuda::Event& event) {
  const cudaError_t status = cudaEventQuery(native(event));
  if (status == cudaErrorNotReady) cudaGetLastError();
  return status;
}

// ncclGroupStart() until end(), or until the scope is left by an exception: a group left open
// would hold back every later NCCL call of this thread, on any communicator.
class NcclGroup {
public:
  NcclGroup() { SG_NCCL_CHECK(ncclGroupStart()); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (!ended_) ncclGroupEnd();  // already failing: the first error is the one reported
  }
  void end() {
    ended_ = true;
    SG_NCCL_CHECK(ncclGroupEnd());
  }

private:
  bool ended_ = false;
};

class ProcessGroupNCCL final : public ProcessGroup {
public:
  ProcessGroupNCCL(std::shared_ptr<TcpStore> store, int rank, int size, int device, std::chrono::milliseconds timeout,
                   bool debug);
  ~ProcessGroupNCCL() override;

  std::string backend_name() const override { return "nccl"; }
  std::string type_name() const override { return "ProcessGroupNCCL"; }
  Device device() const override { return Device::cuda(device_); }
  void set_timeout(std::chrono::milliseconds timeout) override;

private:
  WorkPtr start_all_reduce(Tensor& tensor, ReduceOp op) override;
  WorkPtr start_broadcast(Tensor& tensor, int root) override;
  WorkPtr start_reduce(Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  WorkPtr start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  WorkPtr start_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr start_all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  WorkPtr start_barrier() override;

  class NcclWork;
  using Issue = std::function<void()>;  // queues the NCCL calls on stream_
  // Numbers the collective, orders it after the compute stream, runs `issue`, records its end
  // and hands it to the watchdog. `tensors` stay alive until it has completed.
  WorkPtr launch(CollectiveDescription description, std::vector<Tensor> tensors, const Issue& issue,
                 bool blocks_host = false);
  void watchdog_loop();
  void fail(const std::shared_ptr<NcclWork>& culprit, const std::string& what);
  std::string prefix() const;

  std::shared_ptr<TcpStore> store_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;

  // Held while NCCL calls are queued and while the watchdog aborts, so that no call reaches a
  // communicator being torn down. Lock order: comm_mutex_, then watch_mutex_.
  std::mutex comm_mutex_;
  std::string broken_;        // the failure that aborted the communicator; every later call throws it
  std::string debug_prefix_;  // SG_DIST_DEBUG: where the fingerprints go in the store ("" when off)
  std::atomic<int64_t> next_sequence_{0};
  std::atomic<int64_t> timeout_ms_;

  std::mutex watch_mutex_;
  std::condition_variable watch_changed_;
  std::deque<std::shared_ptr<NcclWork>> outstanding_;  // issue order
  bool stopping_ = false;
  bool aborted_ = false;
  std::thread watchdog_;
};

class ProcessGroupNCCL::NcclWork final : public Work {
public:
  NcclWork(int device, int64_t sequence, CollectiveDescription description, std::vector<Tensor> tensors,
           std::chrono::milliseconds timeout, bool blocks_host)
      : device_(device),
        sequence_(sequence),
        description_(std::move(description)),
        tensors_(std::move(tensors)),
        deadline_(std::chrono::steady_clock::now() + timeout),
        timeout_(timeout),
        blocks_host_(blocks_host) {}

  void wait() override {
    throw_if_failed();
    if (blocks_host_) {
      // Polled rather than cudaEventSynchronize: when the watchdog aborts, the error set here
      // must end the wait even if the kernel never ends.
      for (;;) {
        const cudaError_t status = query_event(done_);
        throw_if_failed();
        if (status == cudaSuccess) return;
        if (status != cudaErrorNotReady) SG_CUDA_CHECK(status);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    cuda::DeviceGuard guard(device_);
    done_.block(cuda::compute_stream());
  }

  bool is_completed() const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_.empty()) return true;
    }
    return query_event(done_) == cudaSuccess;
  }

  void set_error(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }

  // Whether the GPU has passed the collective's end; errors of the query itself are the
  // watchdog's to report, as a failure of this collective.
  cudaError_t query() const { return query_event(done_); }

  cuda::Event& ready() { return ready_; }
  cuda::Event& done() { return done_; }
  int64_t sequence() const { return sequence_; }
  const CollectiveDescription& description() const { return description_; }
  bool overdue(std::chrono::steady_clock::time_point now) const { return now > deadline_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

private:
  void throw_if_failed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) throw Error(error_);
  }

  int device_;
  int64_t sequence_;
  CollectiveDescription description_;
  std::vector<Tensor> tensors_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds timeout_;
  bool blocks_host_;
  cuda::Event ready_, done_;  // recorded on the compute stream before, on the NCCL stream after
  mutable std::mutex mutex_;
  std::string error_;
};

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<TcpStore> store, int rank, int size, int device,
                                   std::chrono::milliseconds timeout, bool debug)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      device_(device),
      timeout_ms_(timeout.count()) {
  cuda::DeviceGuard guard(device_);
  // Every rank creates its groups in the same order, so the n-th group of each process meets
  // under the same keys.
  const std::string group_key = "nccl/" + std::to_string(next_group_index());
  if (debug) debug_prefix_ = group_key + "/fingerprint";
  const std::string key = group_key + "/unique_id";
  ncclUniqueId id;
  if (rank == 0) {
    SG_NCCL_CHECK(ncclGetUniqueId(&id));
    store_->set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
  } else {
    const std::vector<char> bytes = store_->get(key);  // waits for rank 0, at most the store's timeout
    SG_CHECK(bytes.size() == sizeof id.internal, prefix(), ": the NCCL id under '", key, "' in the store has ",
             bytes.size(), " bytes, expected ", sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  try {
    SG_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
  } catch (const Error& e) {
    SG_FAIL(prefix(), ": joining the NCCL communicator failed: ", e.what());
  }
  SG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

// Like the Gloo group, a collective once issued completes or fails: the watchdog runs until every
// outstanding one has passed (or the timeout aborted them). Then the communicator is destroyed,
// which NCCL does together with the other ranks (they are destroying theirs too at the end of a
// run); an aborted one is already gone.
ProcessGroupNCCL::~ProcessGroupNCCL() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stopping_ = true;
  }
  watch_changed_.notify_all();
  watchdog_.join();
  cuda::DeviceGuard guard(device_);
  if (!aborted_) {
    // A collective that failed while being queued leaves the other ranks' halves unmatched:
    // only an abort is sure to return then.
    if (broken_.empty()) ncclCommDestroy(comm_);
    else ncclCommAbort(comm_);
  }
  cudaStreamDestroy(stream_);
}

std::string ProcessGroupNCCL::prefix() const {
  return ::sg::detail::concat("ProcessGroupNCCL (rank ", rank(), " of ", size(), ", cuda:", device_, ")");
}

void ProcessGroupNCCL::set_timeout(std::chrono::milliseconds timeout) { timeout_ms_ = timeout.count(); }

WorkPtr ProcessGroupNCCL::launch(CollectiveDescription description, std::vector<Tensor> tensors, const Issue& issue,
                                 bool blocks_host) {
  std::lock_guard<std::mutex> comm_lock(comm_mutex_);
  const int64_t sequence = next_sequence_;
  SG_CHECK(broken_.empty(), prefix(), ": ", description.str(sequence),
           " cannot run: the group failed earlier and is unusable:\n  ", broken_);
  if (!debug_prefix_.empty())
    check_fingerprints_through_store(*store_, debug_prefix_, rank(), size(), sequence, description);
  cuda::DeviceGuard guard(device_);
  auto work = std::make_shared<NcclWork>(device_, sequence, std::move(description), std::move(tensors),
                                         std::chrono::milliseconds(timeout_ms_.load()), blocks_host);
  work->ready().record();  // on the compute stream
  work->ready().block(stream_);
  try {
    issue();
  } catch (const Error& e) {
    // The other ranks may have queued their side already and wait for ours: nothing later can
    // match up, so the group is done for.
    broken_ = ::sg::detail::concat("rank ", rank(), ": ", work->description().str(sequence), " failed: ", e.what());
    SG_FAIL(prefix(), ": ", work->description().str(sequence), " failed: ", e.what());
  }
  work->done().record_on(stream_);
  next_sequence_ = sequence + 1;
  {
    std::lock_guard<std::mutex> watch_lock(watch_mutex_);
    outstanding_.push_back(work);
  }
  return work;
}

void ProcessGroupNCCL::watchdog_loop() {
  cudaSetDevice(device_);  // for ncclCommAbort; the thread has no other CUDA work
  int64_t published = 0;   // how many collectives the store has been told about
  for (;;) {
    std::shared_ptr<NcclWork> culprit;
    std::string what;
    bool aborted = false;
    {
      std::unique_lock<std::mutex> lock(watch_mutex_);
      watch_changed_.wait_for(lock, std::chrono::milliseconds(50));
      while (!outstanding_.empty()) {
        const cudaError_t status = outstanding_.front()->query();
        if (status == cudaSuccess) {
          outstanding_.pop_front();
          continue;
        }
        if (status != cudaErrorNotReady && !aborted_) {
          culprit = outstanding_.front();
          what = ::sg::detail::concat("failed on the GPU: CUDA error ", cudaGetErrorName(status), " (",
                                      cudaGetErrorString(status), ")");
        }
        break;
      }
      aborted = aborted_;
      if (stopping_ && (outstanding_.empty() || aborted)) return;
      if (!aborted && culprit == nullptr) {
        const auto now = std::chrono::steady_clock::now();
        for (const auto& work : outstanding_)
          if (work->overdue(now)) {
            culprit = work;
            what = ::sg::detail::concat("timed out after ", work->timeout().count(),
                                        " ms (set_timeout or SG_DIST_TIMEOUT change the limit)");
            break;
          }
      }
    }
    if (aborted) continue;  // kernels are exiting; stay until the outstanding events have passed
    if (culprit == nullptr) {
      ncclResult_t async_error = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async_error) == ncclSuccess && async_error != ncclSuccess &&
          async_error != ncclInProgress) {
        const char* last = ncclGetLastError(comm_);
        what = ::sg::detail::concat("failed: NCCL reports ", ncclGetErrorString(async_error),
                                    last && *last ? ::sg::detail::concat(" (", last, ")") : std::string());
        std::lock_guard<std::mutex> lock(watch_mutex_);
        if (!outstanding_.empty()) culprit = outstanding_.front();
      }
    }
    if (!what.empty()) {
      fail(culprit, what);
      continue;
    }
    const int64_t issued = next_sequence_;
    if (issued != published) {
      try {
        mark_started(*store_, rank(), issued - 1);
        published = issued;
      } catch (const std::exception&) {
        // The store is gone (rank 0 exited): only the failure messages needed it.
      }
    }
  }
}

void ProcessGroupNCCL::fail(const std::shared_ptr<NcclWork>& culprit, const std::string& what) {
  const int64_t sequence = culprit ? culprit->sequence() : next_sequence_ - 1;
  const std::string collective = culprit ? culprit->description().str(sequence)
                                         : ::sg::detail::concat("the communicator (after collective #", sequence, ")");
  const std::string message = ::sg::detail::concat(prefix(), ": ", collective, " ", what, "\n  ",
                                                   diagnose_failure(*store_, rank(), size(), sequence));
  std::fprintf(stderr, "%s\n  Aborting the NCCL communicator; wait() and every later collective of this group throw.\n",
               message.c_str());
  std::lock_guard<std::mutex> comm_lock(comm_mutex_);
  broken_ = message;
  {
    // Before the abort lets the kernels exit: a wait() that sees them done must see the error.
    std::lock_guard<std::mutex> watch_lock(watch_mutex_);
    for (const auto& work : outstanding_) work->set_error(message);
    aborted_ = true;
  }
  ncclCommAbort(comm_);
}

WorkPtr ProcessGroupNCCL::start_all_reduce(Tensor& tensor, ReduceOp op) {
  const Tensor t = tensor;
  return launch({CollectiveOp::all_reduce, static_cast<int>(op), static_cast<int>(t.dtype()), -1, t.sizes()}, {t}, [&] {
    if (t.numel() == 0) return;
    SG_NCCL_CHECK(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()),
                                nccl_op(op, t.dtype()), comm_, stream_));
  });
}

WorkPtr ProcessGroupNCCL::start_broadcast(Tensor& tensor, int root) {
  const Tensor t = tensor;
  return launch({CollectiveOp::broadcast, -1, static_cast<int>(t.dtype()), root, t.sizes()}, {t}, [&] {
    if (t.numel() == 0) return;
    SG_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()), root,
                                comm_, stream_));
  });
}

WorkPtr ProcessGroupNCCL::start_reduce(Tensor& tensor, int root, ReduceOp op) {
  const Tensor t = tensor;
  return launch({CollectiveOp::reduce, static_cast<int>(op), static_cast<int>(t.dtype()), root, t.sizes()}, {t}, [&] {
    if (t.numel() == 0) return;
    SG_NCCL_CHECK(ncclReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()),
                             nccl_op(op, t.dtype()), root, comm_, stream_));
  });
}

WorkPtr ProcessGroupNCCL::start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  // NCCL gathers into one buffer of size() slots; the outputs may live anywhere, so the slots are
  // copied out on the NCCL stream, still before the collective's end event.
  const Tensor gathered = empty({size() * input.numel()}, {input.dtype(), device()});
  std::vector<Tensor> keep = outputs;
  keep.push_back(input);
  keep.push_back(gathered);
  return launch(
      {CollectiveOp::all_gather, -1, static_cast<int>(input.dtype()), -1, input.sizes()}, std::move(keep), [&] {
        const size_t bytes = nbytes_of(input);
        if (bytes == 0) return;
        SG_NCCL_CHECK(ncclAllGather(input.raw_data(), gathered.raw_data(), static_cast<size_t>(input.numel()),
                                    nccl_dtype(input.dtype()), comm_, stream_));
        const auto* slots = static_cast<const uint8_t*>(gathered.raw_data());
        for (size_t r = 0; r < outputs.size(); ++r)
          SG_CUDA_CHECK(
              cudaMemcpyAsync(outputs[r].raw_data(), slots + r * bytes, bytes, cudaMemcpyDeviceToDevice, stream_));
      });
}

// gather and scatter are point-to-point: the root receives from (sends to) every other rank in
// one NCCL group call, and copies its own part on the NCCL stream.
WorkPtr ProcessGroupNCCL::start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  const bool is_root = rank() == root;
  std::vector<Tensor> keep = is_root ? outputs : std::vector<Tensor>{};
  keep.push_back(input);
  return launch({CollectiveOp::gather, -1, static_cast<int>(input.dtype()), root, input.sizes()}, std::move(keep), [&] {
    const size_t bytes = nbytes_of(input);
    if (bytes == 0) return;
    if (!is_root) {
      SG_NCCL_CHECK(ncclSend(input.raw_data(), bytes, ncclUint8, root, comm_, stream_));
      return;
    }
    SG_CUDA_CHECK(cudaMemcpyAsync(outputs[static_cast<size_t>(root)].raw_data(), input.raw_data(), bytes,
                                  cudaMemcpyDeviceToDevice, stream_));
    NcclGroup group;
    for (int r = 0; r < size(); ++r)
      if (r != root)
        SG_NCCL_CHECK(ncclRecv(outputs[static_cast<size_t>(r)].raw_data(), bytes, ncclUint8, r, comm_, stream_));
    group.end();
  });
}

WorkPtr ProcessGroupNCCL::start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  const bool is_root = rank() == root;
  std::vector<Tensor> keep = is_root ? inputs : std::vector<Tensor>{};
  keep.push_back(output);
  return launch(
      {CollectiveOp::scatter, -1, static_cast<int>(output.dtype()), root, output.sizes()}, std::move(keep), [&] {
        const size_t bytes = nbytes_of(output);
        if (bytes == 0) return;
        if (!is_root) {
          SG_NCCL_CHECK(ncclRecv(output.raw_data(), bytes, ncclUint8, root, comm_, stream_));
          return;
        }
        SG_CUDA_CHECK(cudaMemcpyAsync(output.raw_data(), inputs[static_cast<size_t>(root)].raw_data(), bytes,
                                      cudaMemcpyDeviceToDevice, stream_));
        NcclGroup group;
        for (int r = 0; r < size(); ++r)
          if (r != root)
            SG_NCCL_CHECK(ncclSend(inputs[static_cast<size_t>(r)].raw_data(), bytes, ncclUint8, r, comm_, stream_));
        group.end();
      });
}

WorkPtr ProcessGroupNCCL::start_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  const Tensor out = output, in = input;
  return launch(
      {CollectiveOp::reduce_scatter_tensor, static_cast<int>(op), static_cast<int>(in.dtype()), -1, in.sizes()},
      {out, in}, [&] {
        if (out.numel() == 0) return;
        SG_NCCL_CHECK(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                        nccl_dtype(in.dtype()), nccl_op(op, in.dtype()), comm_, stream_));
      });
}

WorkPtr ProcessGroupNCCL::start_all_gather_into_tensor(Tensor& output, const Tensor& input) {
  const Tensor out = output, in = input;
  return launch({CollectiveOp::all_gather_into_tensor, -1, static_cast<int>(in.dtype()), -1, in.sizes()}, {out, in},
                [&] {
                  if (in.numel() == 0) return;
                  SG_NCCL_CHECK(ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()),
                                              nccl_dtype(in.dtype()), comm_, stream_));
                });
}

// An all-reduce of one byte whose value nobody reads; its wait() blocks the host.
WorkPtr ProcessGroupNCCL::start_barrier() {
  const Tensor token = empty({1}, {DType::u8, device()});
  return launch(
      {CollectiveOp::barrier, -1, -1, -1, {}}, {token},
      [&] { SG_NCCL_CHECK(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclUint8, ncclMax, comm_, stream_)); },
      /*blocks_host=*/true);
}

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<TcpStore> store, int rank, int size, int device,
                                                      std::chrono::milliseconds timeout, bool debug) {
  return std::make_unique<ProcessGroupNCCL>(std::move(store), rank, size, device, timeout, debug);
}

}  // namespace sg::dist
