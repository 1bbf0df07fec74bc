#include "dist/exchange.h"

#include <algorithm>
#include <cstring>

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace sg::dist {

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  // A broadcast moves bytes, so tensors of every dtype share one flat byte buffer: one collective
  // per call, whatever the mix (BatchNorm's f32 statistics and i64 counters travel together).
  int64_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<int64_t>(t.numel() * t.element_size());
  if (total == 0) return;
  Tensor flat = empty({total}, {DType::u8, tensors.front().device()});
  uint8_t* bytes = flat.data_ptr<uint8_t>();
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const Tensor source = t.contiguous();
    std::memcpy(bytes + offset, source.raw_data(), source.numel() * source.element_size());
    offset += static_cast<int64_t>(source.numel() * source.element_size());
  }
  group.broadcast(flat, root)->wait();
  offset = 0;
  for (Tensor t : tensors) {
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
