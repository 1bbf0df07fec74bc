#pragma once
// defines: test::FakeProcessGroup — an in-process ProcessGroup for unit tests of what sits on top
//          of collectives (the reducer's buckets, SyncBatchNorm), with no processes: it plays one
//          rank of the group, every other rank contributing zeros, completes each collective the
//          moment it is issued, and logs it.
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace sg::test {

class FakeProcessGroup final : public dist::ProcessGroup {
public:
  // One collective as issued: its name ("all_reduce", "broadcast", ...), the reduce op where it
  // has one, and the tensor it ran on (the input of all_gather, gather and the flat collectives, the output of
  // scatter).
  struct Call {
    std::string op;
    dist::ReduceOp reduce_op;
    Tensor tensor;
  };

  FakeProcessGroup(int rank, int size) : ProcessGroup(rank, size) {}
  std::string backend_name() const override { return "fake"; }
  std::string type_name() const override { return "FakeProcessGroup"; }
  Device device() const override { return Device::cpu(); }
  void set_timeout(std::chrono::milliseconds) override {}

  const std::vector<Call>& calls() const { return calls_; }

private:
  // With every other rank holding zeros: SUM leaves the tensor as it is, AVG divides it by
  // size(), MAX and MIN compare it with 0, PRODUCT gives 0.
  dist::WorkPtr start_all_reduce(Tensor& tensor, dist::ReduceOp op) override;
  dist::WorkPtr start_broadcast(Tensor& tensor, int root) override;
  dist::WorkPtr start_reduce(Tensor& tensor, int root, dist::ReduceOp op) override;
  dist::WorkPtr start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override;
  dist::WorkPtr start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  dist::WorkPtr start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  dist::WorkPtr start_reduce_scatter_tensor(Tensor& output, const Tensor& input, dist::ReduceOp op) override;
  dist::WorkPtr start_all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  dist::WorkPtr start_barrier() override;
  dist::WorkPtr log(const std::string& op, const Tensor& tensor, dist::ReduceOp reduce_op = dist::ReduceOp::SUM);

  std::vector<Call> calls_;
};

}  // namespace sg::test
