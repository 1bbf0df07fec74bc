#include "dist/process_group.h"

#include "core/factory.h"
#include "core/shape.h"

namespace sg::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

// ---- the argument checks every backend shares ----

void ProcessGroup::check_tensor(const Tensor& t, const char* op, const std::string& what) const {
  SG_CHECK(t.defined(), type_name(), "::", op, ": ", what, " is undefined");
  SG_CHECK(t.device() == device(), type_name(), "::", op, ": ", what, " is on ", t.device(), "; this rank's ",
           backend_name(), " group works on ", device(), " tensors (move it there with .to())");
  SG_CHECK(t.is_contiguous(), type_name(), "::", op, ": ", what, " of shape ", shape_str(t.sizes()),
           " must be contiguous (call .contiguous() and copy the result back)");
}

void ProcessGroup::check_one_per_rank(const std::vector<Tensor>& tensors, const Tensor& like, const char* op,
                                      const char* what) const {
  SG_CHECK(static_cast<int>(tensors.size()) == size(), type_name(), "::", op, ": expected ", size(), " ", what,
           " tensors (one per rank), got ", tensors.size());
  for (size_t r = 0; r < tensors.size(); ++r) {
    const std::string name = detail::concat(what, " ", r);
    check_tensor(tensors[r], op, name);
    SG_CHECK(tensors[r].sizes() == like.sizes() && tensors[r].dtype() == like.dtype(), type_name(), "::", op, ": ",
             name, " is ", tensors[r].dtype(), shape_str(tensors[r].sizes()), " but must match ", like.dtype(),
             shape_str(like.sizes()));
  }
}

void ProcessGroup::check_chunks(const Tensor& whole, const char* whole_name, const Tensor& chunk,
                                const char* chunk_name, const char* op) const {
  SG_CHECK(whole.dtype() == chunk.dtype(), type_name(), "::", op, ": ", whole_name, " is ", whole.dtype(), " but ",
           chunk_name, " is ", chunk.dtype(), "; they must match");
  SG_CHECK(whole.numel() == size() * chunk.numel(), type_name(), "::", op, ": ", whole_name, " ", whole.dtype(),
           shape_str(whole.sizes()), " has ", whole.numel(), " elements but must have size() x ", chunk_name,
           "'s = ", size(), " x ", chunk.numel(), " = ", size() * chunk.numel(), " (", chunk_name, " is ",
           chunk.dtype(), shape_str(chunk.sizes()), ")");
}

void ProcessGroup::check_root(int root, const char* op) const {
  SG_CHECK(root >= 0 && root < size(), type_name(), "::", op, ": root ", root, " is not a rank of this group of ",
           size());
}

void ProcessGroup::check_reduce_op(ReduceOp reduce_op, const Tensor& t, const char* op) const {
  SG_CHECK(!(reduce_op == ReduceOp::AVG && t.dtype() == DType::boolean), type_name(), "::", op,
           ": AVG is not defined for bool tensors");
}

// ---- the collectives: check, then hand to the backend ----

WorkPtr ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor");
  check_reduce_op(op, tensor, "all_reduce");
  return start_all_reduce(tensor, op);
}

WorkPtr ProcessGroup::broadcast(Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor");
  check_root(root, "broadcast");
  return start_broadcast(tensor, root);
}

WorkPtr ProcessGroup::reduce(Tensor& tensor, int root, ReduceOp op) {
  check_tensor(tensor, "reduce", "tensor");
  check_root(root, "reduce");
  check_reduce_op(op, tensor, "reduce");
  return start_reduce(tensor, root, op);
}

WorkPtr ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor(input, "all_gather", "input");
  check_one_per_rank(outputs, input, "all_gather", "output");
  return start_all_gather(outputs, input);
}

WorkPtr ProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor(input, "gather", "input");
  check_root(root, "gather");
  if (rank() == root) check_one_per_rank(outputs, input, "gather", "output");
  return start_gather(outputs, input, root);
}

WorkPtr ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor(output, "scatter", "output");
  check_root(root, "scatter");
  if (rank() == root) check_one_per_rank(inputs, output, "scatter", "input");
  return start_scatter(output, inputs, root);
}

WorkPtr ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor(output, "reduce_scatter_tensor", "output");
  check_tensor(input, "reduce_scatter_tensor", "input");
  check_chunks(input, "input", output, "output", "reduce_scatter_tensor");
  check_reduce_op(op, input, "reduce_scatter_tensor");
  return start_reduce_scatter_tensor(output, input, op);
}

WorkPtr ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  check_tensor(output, "all_gather_into_tensor", "output");
  check_tensor(input, "all_gather_into_tensor", "input");
  check_chunks(output, "output", input, "input", "all_gather_into_tensor");
  return start_all_gather_into_tensor(output, input);
}

Tensor ProcessGroup::zeros_for_all_reduce(int64_t numel, DType dtype) { return zeros({numel}, {dtype, device()}); }

}  // namespace sg::dist
