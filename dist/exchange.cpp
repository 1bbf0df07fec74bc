#include "dist/exchange.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace sg::dist {

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  std::map<DType, TensorList> by_dtype;  // ordered by dtype, so every rank packs alike
  for (const Tensor& t : tensors)
    if (t.numel() > 0) by_dtype[t.dtype()].push_back(t);
  for (auto& [dtype, group_tensors] : by_dtype) {
    int64_t total = 0;
    for (const Tensor& t : group_tensors) total += t.numel();
    Tensor flat = empty({total}, {dtype, group_tensors.front().device()});
    int64_t offset = 0;
    for (const Tensor& t : group_tensors) {
      flat.narrow(0, offset, t.numel()).copy_(t.reshape({t.numel()}));
      offset += t.numel();
    }
    group.broadcast(flat, root)->wait();
    offset = 0;
    for (Tensor t : group_tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
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
