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
class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;
  // Where the tensors of its collectives must live: the CPU for Gloo, this rank's GPU for NCCL.
  virtual Device device() const = 0;

  // In place on every rank; AVG divides the sum by size() (integers: truncating division).
  virtual WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM) = 0;
  // `tensor` of rank `root` is copied into `tensor` of every other rank.
  virtual WorkPtr broadcast(Tensor& tensor, int root = 0) = 0;
  // The reduction lands in `tensor` of `root`; other ranks' tensors are left unspecified.
  virtual WorkPtr reduce(Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::SUM) = 0;
  // outputs[r] (size() tensors shaped like input, allocated by the caller) gets rank r's input.
  virtual WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // As all_gather, but only `root` receives (outputs is ignored on the other ranks).
  virtual WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root = 0) = 0;
  // Rank r receives inputs[r] of `root` into `output` (inputs is ignored on the other ranks).
  virtual WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root = 0) = 0;
  virtual WorkPtr barrier() = 0;

  // Applies to collectives issued afterwards (default 30 minutes).
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

protected:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}

private:
  int rank_;
  int size_;
};

}  // namespace sg::dist
