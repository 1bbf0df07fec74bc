#pragma once
// defines: ReduceOp, Work (handle of an asynchronous collective), ProcessGroup (the collective
//          interface every backend implements: Gloo now, NCCL with the CUDA backend).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sg::dist {

enum class ReduceOp { SUM, AVG, PRODUCT, MIN, MAX };
const char* reduce_op_name(ReduceOp op);

// What an asynchronous collective returns. wait() blocks until the collective finished and
// rethrows its error (an sg::Error naming the rank, the op, its sequence number and the size).
class Work {
public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() const = 0;

  // When the collective began and finished running on the communication thread; both are
  // default (epoch) until then. DDP's trace draws each bucket's all-reduce with them.
  struct Timing {
    std::chrono::steady_clock::time_point started, finished;
  };
  virtual Timing timing() const { return {}; }
};
using WorkPtr = std::shared_ptr<Work>;

// A group of `size()` processes that run collectives together. Every rank must issue the same
// collectives in the same order (they are numbered per group; SG_DIST_DEBUG=1 checks it).
// Collectives run in issue order on one communication thread per group; the calls return a Work
// at once and the tensors must stay alive and untouched until wait() returns. The synchronous
// form is `pg.all_reduce(t)->wait()`. Tensors must be contiguous and on the group's device.
//
// The public collectives check their arguments here, once for every backend, and throw an
// sg::Error naming the collective and what was wrong; then they hand the collective to the
// backend's start_* function, which may take the arguments as valid.
class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;
  // The class, for error messages: "ProcessGroupGloo", "ProcessGroupNCCL".
  virtual std::string type_name() const = 0;
  // Where the tensors of its collectives must live: the CPU for Gloo, this rank's GPU for NCCL.
  virtual Device device() const = 0;

  // In place on every rank; AVG divides the sum by size() (integers: truncating division).
  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
  // `tensor` of rank `root` is copied into `tensor` of every other rank.
  WorkPtr broadcast(Tensor& tensor, int root = 0);
  // The reduction lands in `tensor` of `root`; other ranks' tensors are left unspecified.
  WorkPtr reduce(Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::SUM);
  // outputs[r] (size() tensors shaped like input, allocated by the caller) gets rank r's input.
  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input);
  // As all_gather, but only `root` receives (outputs is ignored on the other ranks).
  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root = 0);
  // Rank r receives inputs[r] of `root` into `output` (inputs is ignored on the other ranks).
  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root = 0);
  // The flat forms ZeRO uses (PyTorch's reduce_scatter_tensor and all_gather_into_tensor): `input`
  // holds size() chunks of output.numel() elements, and rank r's `output` gets the reduction over
  // the ranks of chunk r.
  WorkPtr reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM);
  // `output` holds size() chunks of input.numel() elements; chunk r gets rank r's `input`.
  WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input);
  WorkPtr barrier() { return start_barrier(); }

  // Zeros for a tensor this group will all-reduce again and again, such as DDP's gradient
  // buckets: a backend may place it where its all_reduce works best (ProcessGroupGloo: in memory
  // the ranks of one machine share, reduced where it lies; Note [Buckets in shared memory] in
  // dist/shm_all_reduce.cpp). A collective: every rank asks for the same size, in the same order.
  // Here, plain zeros on device().
  virtual Tensor zeros_for_all_reduce(int64_t numel, DType dtype);

  // Applies to collectives issued afterwards (default 30 minutes).
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

protected:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}

  // The backend's half of each collective, called with checked arguments (gather's `outputs`
  // and scatter's `inputs` are checked, and to be used, on `root` only).
  virtual WorkPtr start_all_reduce(Tensor& tensor, ReduceOp op) = 0;
  virtual WorkPtr start_broadcast(Tensor& tensor, int root) = 0;
  virtual WorkPtr start_reduce(Tensor& tensor, int root, ReduceOp op) = 0;
  virtual WorkPtr start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  virtual WorkPtr start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  virtual WorkPtr start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) = 0;
  virtual WorkPtr start_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) = 0;
  virtual WorkPtr start_all_gather_into_tensor(Tensor& output, const Tensor& input) = 0;
  virtual WorkPtr start_barrier() = 0;

private:
  void check_tensor(const Tensor& t, const char* op, const std::string& what) const;
  void check_root(int root, const char* op) const;
  void check_reduce_op(ReduceOp reduce_op, const Tensor& t, const char* op) const;
  // size() tensors shaped like `like`, on this group's device, contiguous ("output 1 is ...").
  void check_one_per_rank(const std::vector<Tensor>& tensors, const Tensor& like, const char* op,
                          const char* what) const;
  // `whole` holds size() chunks shaped like `chunk` in number of elements, of its dtype.
  void check_chunks(const Tensor& whole, const char* whole_name, const Tensor& chunk, const char* chunk_name,
                    const char* op) const;

  int rank_;
  int size_;
};

}  // namespace sg::dist
