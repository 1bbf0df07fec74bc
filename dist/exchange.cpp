#include "dist/exchange.h"

#include <algorithm>
#include <cstring>

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace sg::dist {

namespace {

// Where each tensor sits in the flat byte buffer: at a multiple of 8 bytes, so that a tensor of
// any dtype can be viewed in place there.
int64_t aligned(int64_t bytes) { return (bytes + 7) / 8 * 8; }

// `like`'s shape and dtype, viewed at `byte_offset` of the byte buffer `flat` (sharing its
// storage). Packing and unpacking are then plain tensor copies, which run where the tensors
// live: on the CPU, or on the GPU for an NCCL group.
Tensor slot_in(const Tensor& flat, int64_t byte_offset, const Tensor& like) {
  return Tensor(std::make_shared<TensorImpl>(flat.storage(), byte_offset / static_cast<int64_t>(like.element_size()),
                                             like.sizes(), contiguous_strides(like.sizes()), like.dtype()));
}

}  // namespace

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root) {
  CoalescedBroadcast(group, tensors, root).finish();
}

CoalescedBroadcast::CoalescedBroadcast(ProcessGroup& group, TensorList tensors, int root)
    : tensors_(std::move(tensors)),
      is_root_(group.rank() == root) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  // A broadcast moves bytes, so tensors of every dtype share one flat byte buffer: one collective
  // per call, whatever the mix (BatchNorm's f32 statistics and i64 counters travel together).
  int64_t total = 0;
  for (const Tensor& t : tensors_) total = aligned(total) + static_cast<int64_t>(t.numel() * t.element_size());
  if (total == 0) return;
  flat_ = empty({total}, {DType::u8, tensors_.front().device()});
  if (is_root_) {
    int64_t offset = 0;
    for (const Tensor& t : tensors_) {
      offset = aligned(offset);
      slot_in(flat_, offset, t).copy_(t);
      offset += static_cast<int64_t>(t.numel() * t.element_size());
    }
  }
  work_ = group.broadcast(flat_, root);
}

CoalescedBroadcast& CoalescedBroadcast::operator=(CoalescedBroadcast&& other) {
  if (this != &other) {
    wait_quietly();
    tensors_ = std::move(other.tensors_);
    flat_ = std::move(other.flat_);
    work_ = std::move(other.work_);
    is_root_ = other.is_root_;
  }
  return *this;
}

CoalescedBroadcast::~CoalescedBroadcast() { wait_quietly(); }

void CoalescedBroadcast::wait_quietly() noexcept {
  if (!work_) return;
  try {
    work_->wait();
  } catch (...) {
    // The error was the owner's to see through finish(); a destructor can only drop it.
  }
  work_ = nullptr;
}

void CoalescedBroadcast::finish() {
  if (!work_) return;
  const WorkPtr work = std::move(work_);
  work->wait();
  // Root's tensors are the source; they may have moved on since the bytes were packed.
  if (is_root_) return;
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (Tensor t : tensors_) {
    offset = aligned(offset);
    t.copy_(slot_in(flat_, offset, t));
    offset += static_cast<int64_t>(t.numel() * t.element_size());
  }
}

// The texts are built and read on the host and travel on the group's device.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  const int world = group.size();
  const Device device = group.device();
  Tensor length = full({1}, static_cast<double>(text.size()), {DType::i64}).to(device);
  std::vector<Tensor> lengths;
  for (int r = 0; r < world; ++r) lengths.push_back(empty({1}, {DType::i64, device}));
  group.all_gather(lengths, length)->wait();

  int64_t longest = 0;
  for (const Tensor& l : lengths) longest = std::max(longest, l.item<int64_t>());
  // Every text is empty (the common answer "no error"): nothing to send, and the lengths' gather
  // was already the meeting point of every rank.
  if (longest == 0) return std::vector<std::string>(static_cast<size_t>(world));
  // all_gather needs equal shapes: pad every text to the longest.
  Tensor bytes = zeros({longest}, {DType::u8});
  std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), text.size());
  bytes = bytes.to(device);
  std::vector<Tensor> gathered;
  for (int r = 0; r < world; ++r) gathered.push_back(empty({longest}, {DType::u8, device}));
  group.all_gather(gathered, bytes)->wait();

  std::vector<std::string> texts;
  for (int r = 0; r < world; ++r) {
    const Tensor on_host = gathered[r].to(Device::cpu());
    texts.emplace_back(reinterpret_cast<const char*>(on_host.data_ptr<uint8_t>()), lengths[r].item<int64_t>());
  }
  return texts;
}

}  // namespace sg::dist
