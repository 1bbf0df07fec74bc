#include "train/zero_redundancy_optimizer.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "dist/dist.h"
#include "dist/exchange.h"

namespace sg::dist {

namespace {

// What the base class is told the optimizer is called: "ZeroRedundancyOptimizer(AdamW)". Runs
// before the members exist, so it is also where a missing optimizer is refused.
std::string wrapped_name(const optim::Optimizer* optimizer) {
  SG_CHECK(optimizer != nullptr, "ZeroRedundancyOptimizer: got no optimizer to wrap (build one over the model's ",
           "parameters, e.g. std::make_unique<optim::AdamW>(model->parameters()))");
  return "ZeroRedundancyOptimizer(" + optimizer->type_name() + ")";
}

// While alive, the parameters other ranks own have no gradient, so the wrapped optimizer, which
// skips a parameter without one (as torch.optim does), steps this rank's shard only and creates
// state for it only. The gradients come back at scope exit, for whatever reads them after the step.
class OtherShardsHidden {
public:
  OtherShardsHidden(const TensorList& params, const std::vector<int>& owners, int rank) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      if (owners[i] == rank || !params[i].grad().defined()) continue;
      hidden_.emplace_back(params[i], params[i].grad());
      hidden_.back().first.set_grad(Tensor());
    }
  }
  ~OtherShardsHidden() {
    NoGradGuard no_grad;
    for (auto& [param, grad] : hidden_) param.set_grad(grad);
  }
  OtherShardsHidden(const OtherShardsHidden&) = delete;
  OtherShardsHidden& operator=(const OtherShardsHidden&) = delete;

private:
  std::vector<std::pair<Tensor, Tensor>> hidden_;
};

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::unique_ptr<optim::Optimizer> optimizer, ProcessGroup* group)
    : Optimizer(wrapped_name(optimizer.get())),
      optimizer_(std::move(optimizer)),
      group_(group != nullptr ? *group : default_group()),
      params_(optimizer_->all_params()) {
  const Tensor& first = params_.front();  // an optimizer always has parameters
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    SG_CHECK(p.dtype() == first.dtype(), type_name(), ": parameter ", i, " is ", p.dtype(), shape_str(p.sizes()),
             " but parameter 0 is ", first.dtype(),
             "; the shards travel in one flat all-gather, so every parameter must have one dtype");
    SG_CHECK(p.device() == group_.device(), type_name(), ": parameter ", i, " is on ", p.device(), " but the ",
             group_.backend_name(), " group works on ", group_.device(), " tensors (move the model there first)");
    SG_CHECK(p.is_contiguous(), type_name(), ": parameter ", i, " of shape ", shape_str(p.sizes()),
             " is not contiguous");
  }
  for (size_t i = 0; i < params_.size(); ++i) index_of_[params_[i].impl()] = i;
  partition();
  check_same_parameters_on_every_rank();
  const optim::OptimizerState existing = optimizer_->state_dict();
  if (!existing.tensors.empty()) optimizer_->load_state_dict(keep_local_shard(existing));
}

// Note [ZeRO-1: what is sharded]: largest first within each group, each to the least-loaded rank.
void ZeroRedundancyOptimizer::partition() {
  owners_.assign(params_.size(), 0);
  shard_numels_.assign(static_cast<size_t>(group_.size()), 0);
  size_t first_of_group = 0;
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    std::vector<size_t> order(optimizer_->params(g).size());
    std::iota(order.begin(), order.end(), first_of_group);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
    for (size_t index : order) {
      const auto least = std::min_element(shard_numels_.begin(), shard_numels_.end());  // the first on a tie
      owners_[index] = static_cast<int>(least - shard_numels_.begin());
      *least += params_[index].numel();
    }
    first_of_group += order.size();
  }
}

// Ranks whose parameters differ would compute different partitions and all-gather buffers of
// different sizes; say so now instead.
void ZeroRedundancyOptimizer::check_same_parameters_on_every_rank() const {
  std::ostringstream shapes;
  for (const Tensor& p : params_) shapes << p.dtype() << shape_str(p.sizes()) << " ";
  const std::vector<std::string> every_rank = all_gather_strings(group_, shapes.str());
  for (int r = 0; r < group_.size(); ++r)
    SG_CHECK(every_rank[static_cast<size_t>(r)] == every_rank[0], type_name(), " (rank ", group_.rank(),
             "): the ranks' parameters differ, so they cannot share one partition: rank 0 has ", every_rank[0],
             "; rank ", r, " has ", every_rank[static_cast<size_t>(r)]);
}

int64_t ZeroRedundancyOptimizer::total_numel() const {
  return std::accumulate(shard_numels_.begin(), shard_numels_.end(), int64_t{0});
}

int64_t ZeroRedundancyOptimizer::local_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, tensor] : local_state_dict().tensors)
    bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes;
}

void ZeroRedundancyOptimizer::step() {
  consolidated_.reset();
  {
    const OtherShardsHidden hidden(params_, owners_, group_.rank());
    optimizer_->step();
  }
  all_gather_parameters();
}

// Note [ZeRO-1: syncing the parameters after the step].
void ZeroRedundancyOptimizer::all_gather_parameters() {
  if (group_.size() == 1) return;
  NoGradGuard no_grad;
  const int64_t slot = *std::max_element(shard_numels_.begin(), shard_numels_.end());
  const TensorOptions options{params_.front().dtype(), group_.device()};
  // Each parameter's place in its owner's slot, in parameter order.
  const auto for_each_of = [&](int rank, const auto& visit) {
    int64_t offset = static_cast<int64_t>(rank) * slot;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owners_[i] != rank) continue;
      visit(params_[i], offset);
      offset += params_[i].numel();
    }
  };
  Tensor mine = zeros({slot}, options);
  for_each_of(group_.rank(), [&](const Tensor& p, int64_t offset) {
    mine.narrow(0, offset - group_.rank() * slot, p.numel()).copy_(p.view({p.numel()}));
  });
  Tensor every_shard = empty({group_.size() * slot}, options);
  group_.all_gather_into_tensor(every_shard, mine)->wait();
  for (int r = 0; r < group_.size(); ++r) {
    if (r == group_.rank()) continue;
    for_each_of(r, [&](Tensor p, int64_t offset) {
      p.view({p.numel()}).copy_(every_shard.narrow(0, offset, p.numel()));
      p.storage()->bump_version();  // as the optimizer's own update does
    });
  }
}

optim::OptimizerState ZeroRedundancyOptimizer::keep_local_shard(const optim::OptimizerState& state) const {
  // Keys read "state.<index>.<field>" (optim::OptimizerState); these are the prefixes to drop.
  std::set<std::string> of_other_ranks;
  for (size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] != group_.rank()) of_other_ranks.insert("state." + std::to_string(i) + ".");
  optim::OptimizerState local = state;
  local.tensors.clear();
  for (const auto& [key, tensor] : state.tensors) {
    const size_t second_dot = key.find('.', key.find('.') + 1);
    // Anything else goes on, for the wrapped optimizer to check (and refuse if it is wrong).
    if (second_dot == std::string::npos || !of_other_ranks.count(key.substr(0, second_dot + 1)))
      local.tensors[key] = tensor;
  }
  return local;
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  SG_CHECK(to >= 0 && to < group_.size(), type_name(), ".consolidate_state_dict: rank ", to,
           " is not a rank of this group of ", group_.size());
  consolidated_.reset();
  const optim::OptimizerState local = local_state_dict();
  // Every rank learns each shard's keys, dtypes and shapes first, so that it can take part in the
  // broadcast of each shard's tensors (one coalesced broadcast per rank).
  std::ostringstream layout;
  for (const auto& [key, tensor] : local.tensors) {
    layout << key << ' ' << static_cast<int>(tensor.dtype()) << ' ' << tensor.dim();
    for (int64_t size : tensor.sizes()) layout << ' ' << size;
    layout << '\n';
  }
  const std::vector<std::string> layouts = all_gather_strings(group_, layout.str());
  optim::OptimizerState whole = local;
  for (int r = 0; r < group_.size(); ++r) {
    std::vector<std::string> keys;
    TensorList tensors;
    std::istringstream lines(layouts[static_cast<size_t>(r)]);
    for (std::string key; lines >> key;) {
      int dtype = 0;
      int64_t dims = 0;
      lines >> dtype >> dims;
      Shape shape(static_cast<size_t>(dims));
      for (int64_t& size : shape) lines >> size;
      keys.push_back(key);
      // The owner sends its own tensors; the others receive into fresh ones on the group's device.
      tensors.push_back(r == group_.rank() ? local.tensors.at(key).to(group_.device())
                                           : empty(shape, {static_cast<DType>(dtype), group_.device()}));
    }
    if (tensors.empty()) continue;
    broadcast_coalesced(group_, tensors, r);
    if (group_.rank() == to && r != to)
      for (size_t k = 0; k < keys.size(); ++k) whole.tensors[keys[k]] = tensors[k];
  }
  if (group_.rank() == to) consolidated_ = std::move(whole);
}

optim::OptimizerState ZeroRedundancyOptimizer::state_dict() const {
  SG_CHECK(consolidated_.has_value(), type_name(), ".state_dict() on rank ", group_.rank(),
           ": this rank holds only its shard of the state; call consolidate_state_dict(to) on every rank "
           "first, then state_dict() on rank `to` (it is valid until the next step), or local_state_dict() for "
           "the shard");
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const optim::OptimizerState& state) {
  consolidated_.reset();
  optimizer_->load_state_dict(keep_local_shard(state));
}

nn::NamedTensors ZeroRedundancyOptimizer::named_state(const nn::NamedTensors&) const { return {}; }

std::string zero_sharding_note(const optim::Optimizer& optimizer, int state_tensors_per_element) {
  const auto* zero = dynamic_cast<const ZeroRedundancyOptimizer*>(&optimizer);
  if (zero == nullptr) return "";
  const double bytes_per_element =
      static_cast<double>(state_tensors_per_element) * static_cast<double>(zero->all_params().front().element_size());
  const int world = zero->process_group().size();
  std::ostringstream megabytes, elements;
  megabytes.setf(std::ios::fixed);
  megabytes.precision(2);
  for (int r = 0; r < world; ++r) {
    megabytes << (r > 0 ? " | " : "") << static_cast<double>(zero->shard_numel(r)) * bytes_per_element / 1e6;
    elements << (r > 0 ? " | " : "") << zero->shard_numel(r);
  }
  megabytes << " of " << static_cast<double>(zero->total_numel()) * bytes_per_element / 1e6;
  return std::string(zero->shards_gradients() ? ", ZeRO-2 (gradients reduce-scattered)" : ", ZeRO-1") + " over " +
         std::to_string(world) + " processes: optimizer state per rank " + megabytes.str() +
         " MB (whole parameters: " + elements.str() + " of " + std::to_string(zero->total_numel()) + " elements)";
}

}  // namespace sg::dist
