#include "dist/exchange.h"

#include <algorithm>
#include <cstring>

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace sg::dist {

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root) {
  CoalescedBroadcast(group, tensors, root).finish();
}

CoalescedBroadcast::CoalescedBroadcast(ProcessGroup& group, TensorList tensors, int root)
    : tensors_(std::move(tensors)), is_root_(group.rank() == root) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  // A broadcast moves bytes, so tensors of every dtype share one flat byte buffer: one collective
  // per call, whatever the mix (BatchNorm's f32 statistics and i64 counters travel together).
  int64_t total = 0;
  for (const Tensor& t : tensors_) total += static_cast<int64_t>(t.numel() * t.element_size());
  if (total == 0) return;
  flat_ = empty({total}, {DType::u8, tensors_.front().device()});
  if (is_root_) {
    uint8_t* bytes = flat_.data_ptr<uint8_t>();
    int64_t offset = 0;
    for (const Tensor& t : tensors_) {
      const Tensor source = t.contiguous();
      std::memcpy(bytes + offset, source.raw_data(), source.numel() * source.element_size());
      offset += static_cast<int64_t>(source.numel() * source.element_size());
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
  const uint8_t* bytes = flat_.data_ptr<uint8_t>();
  int64_t offset = 0;
  for (Tensor t : tensors_) {
    const size_t size = t.numel() * t.element_size();
    if (t.is_contiguous()) {
      std::memcpy(t.raw_data(), bytes + offset, size);
    } else {
      Tensor staged = empty(t.sizes(), {t.dtype(), t.device()});
      std::memcpy(staged.raw_data(), bytes + offset, size);
      t.copy_(staged);
    }
    offset += static_cast<int64_t>(size);
  }
}

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  const int world = group.size();
  Tensor length = full({1}, static_cast<double>(text.size()), {DType::i64});
  std::vector<Tensor> lengths;
  for (int r = 0; r < world; ++r) lengths.push_back(empty({1}, {DType::i64}));
  group.all_gather(lengths, length)->wait();

  int64_t longest = 0;
  for (const Tensor& l : lengths) longest = std::max(longest, l.item<int64_t>());
  // all_gather needs equal shapes: pad every text to the longest.
  Tensor bytes = zeros({longest}, {DType::u8});
  std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), text.size());
  std::vector<Tensor> gathered;
  for (int r = 0; r < world; ++r) gathered.push_back(empty({longest}, {DType::u8}));
  group.all_gather(gathered, bytes)->wait();

  std::vector<std::string> texts;
  for (int r = 0; r < world; ++r)
    texts.emplace_back(reinterpret_cast<const char*>(gathered[r].data_ptr<uint8_t>()), lengths[r].item<int64_t>());
  return texts;
}

}  // namespace sg::dist
