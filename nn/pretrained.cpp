#include "nn/pretrained.h"

#include "core/safetensors.h"

namespace sg::nn {

namespace {
std::string list_line(const char* title, const std::vector<std::string>& keys) {
  std::string line = std::string(title) + " (" + std::to_string(keys.size()) + "):";
  if (keys.empty()) return line + " (none)\n";
  for (size_t i = 0; i < keys.size(); ++i) line += (i == 0 ? " " : ", ") + keys[i];
  return line + "\n";
}
}  // namespace

std::string PretrainedReport::str() const {
  return "loaded " + std::to_string(loaded) + " of " + std::to_string(expected) + " tensors\n" +
         list_line("dropped, shape differs from the model's", dropped_keys) +
         list_line("missing from the file", missing_keys) + list_line("unexpected, not in the model", unexpected_keys);
}

PretrainedReport load_pretrained(Module& model, const StateDict& state) {
  PretrainedReport report;
  const StateDict own = model.state_dict();
  StateDict kept;
  for (const auto& [name, tensor] : state) {
    auto it = own.find(name);
    if (it != own.end() && it->second.sizes() != tensor.sizes()) {
      report.dropped_keys.push_back(name + " (file " + shape_str(tensor.sizes()) + ", model " +
                                    shape_str(it->second.sizes()) + ")");
      continue;
    }
    kept.emplace(name, tensor);
  }
  Module::LoadResult loaded = model.load_state_dict(kept, /*strict=*/false);
  // A dropped key is not in `kept`, so load_state_dict calls it missing; it is reported once, as dropped.
  for (const std::string& name : loaded.missing_keys)
    if (!state.contains(name)) report.missing_keys.push_back(name);
  report.unexpected_keys = std::move(loaded.unexpected_keys);
  report.expected = static_cast<int64_t>(own.size());
  report.loaded = report.expected - static_cast<int64_t>(loaded.missing_keys.size());
  return report;
}

PretrainedReport load_pretrained(Module& model, const std::string& safetensors_path) {
  return load_pretrained(model, load_safetensors(safetensors_path).tensors);
}

}  // namespace sg::nn
