// Reader and writer for Note [The safetensors layout] (core/safetensors.h).
#include "core/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "core/atomic_file.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg {

// Tensors are written from memory as they are: the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian machine");

namespace {
using json = nlohmann::json;

constexpr std::pair<DType, const char*> kDTypeCodes[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::u8, "U8"},   {DType::boolean, "BOOL"},
};
// The reference implementation refuses larger headers; so do we, before allocating one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

const char* dtype_code(DType dtype) {
  for (const auto& [d, code] : kDTypeCodes)
    if (d == dtype) return code;
  SG_FAIL("safetensors: no code for dtype ", dtype);
}

// Elements in row-major order on the CPU: `t` itself when it already is, else a kernel-level copy
// (core records no autograd history).
Tensor contiguous_cpu(const Tensor& t) {
  if (t.is_contiguous() && t.device().is_cpu()) return t;
  Tensor out = empty(t.sizes(), {t.dtype(), Device::cpu()});
  kernels::copy(out, t);
  return out;
}

std::string header_text(const std::map<std::string, Tensor>& tensors,
                        const std::map<std::string, std::string>& metadata, const std::string& path) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    SG_CHECK(name != kMetadataKey, "save_safetensors: ", path, ": '", kMetadataKey, "' cannot name a tensor");
    SG_CHECK(tensor.defined(), "save_safetensors: ", path, ": tensor '", name, "' is undefined");
    const uint64_t nbytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[name] = {
        {"dtype", dtype_code(tensor.dtype())}, {"shape", tensor.sizes()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& error) {  // a name or value that is not valid UTF-8
    SG_FAIL("save_safetensors: ", path, ": the header cannot be written as JSON: ", error.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}
}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = header_text(tensors, metadata, path);
  write_file_atomically(path, [&](const ByteWriter& write) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
    write(length, sizeof(length));
    write(header.data(), header.size());
    for (const auto& [name, tensor] : tensors) {
      const Tensor data = contiguous_cpu(tensor);
      write(data.raw_data(), static_cast<size_t>(data.numel()) * data.element_size());
    }
  });
}

namespace {
// One tensor's header entry, checked.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

class Reader {
public:
  explicit Reader(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) throw fail("cannot open it: ", std::system_category().message(errno));
    SG_CHECK(std::fseek(file_.get(), 0, SEEK_END) == 0, "load_safetensors: ", path, ": cannot seek");
    const long size = std::ftell(file_.get());
    if (size < 0) throw fail("cannot tell its size");
    size_ = static_cast<uint64_t>(size);
  }

  SafetensorsFile read() {
    if (size_ < 8) throw fail("the file has ", size_, " bytes, fewer than the 8 of the header length");
    unsigned char length_bytes[8];
    read_at(0, length_bytes, 8);
    uint64_t header_length = 0;
    for (int i = 0; i < 8; ++i) header_length |= static_cast<uint64_t>(length_bytes[i]) << (8 * i);
    if (header_length > size_ - 8)
      throw fail("the header length ", header_length, " exceeds the ", size_ - 8, " bytes that follow it (truncated?)");
    if (header_length > kMaxHeaderBytes)
      throw fail("the header length ", header_length, " exceeds the format's limit of ", kMaxHeaderBytes);
    std::string text(header_length, '\0');
    read_at(8, text.data(), header_length);
    data_start_ = 8 + header_length;

    json header;
    try {
      header = json::parse(text);
    } catch (const json::exception& error) {
      throw fail("the header is not valid JSON: ", error.what());
    }
    if (!header.is_object()) throw fail("the header is not a JSON object");

    SafetensorsFile out;
    std::vector<Entry> entries;
    for (const auto& [name, value] : header.items()) {
      if (name == kMetadataKey) out.metadata = parse_metadata(value);
      else entries.push_back(parse_entry(name, value));
    }
    check_layout(entries);
    for (const Entry& entry : entries) out.tensors[entry.name] = read_tensor(entry);
    return out;
  }

private:
  // The tensors that hold bytes must tile the data section exactly, as the reference reader
  // demands: no byte shared by two tensors, none left between them or after the last. Tensors of
  // 0 bytes hold nothing and are left out: one at [8, 8) would sort anywhere among the tensors
  // starting at 8 (std::sort is not stable), and next to [8, 16) it would look like an overlap.
  void check_layout(const std::vector<Entry>& entries) const {
    std::vector<const Entry*> holding;
    for (const Entry& entry : entries)
      if (entry.end > entry.begin) holding.push_back(&entry);
    std::sort(holding.begin(), holding.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
    uint64_t covered = 0;  // bytes [0, covered) belong to the tensors checked so far
    for (size_t i = 0; i < holding.size(); ++i) {
      const Entry& entry = *holding[i];
      if (entry.begin < covered)
        throw fail("tensors '", holding[i - 1]->name, "' and '", entry.name, "' overlap in the data section");
      if (entry.begin > covered)
        throw fail("bytes [", covered, ", ", entry.begin, ") of the data section, before tensor '", entry.name,
                   "', belong to no tensor");
      covered = entry.end;
    }
    if (covered != size_ - data_start_)
      throw fail("bytes [", covered, ", ", size_ - data_start_, ") at the end of the data section belong to no tensor");
  }

  template <typename... Parts>
  Error fail(const Parts&... parts) const {
    return Error(detail::concat("load_safetensors: ", path_, ": ", parts...));
  }

  void read_at(uint64_t offset, void* out, uint64_t nbytes) {
    if (nbytes == 0) return;
    if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0 ||
        std::fread(out, 1, nbytes, file_.get()) != nbytes)
      throw fail("reading ", nbytes, " bytes at offset ", offset, " failed");
  }

  std::map<std::string, std::string> parse_metadata(const json& value) const {
    if (!value.is_object()) throw fail("'", kMetadataKey, "' is not a JSON object");
    std::map<std::string, std::string> metadata;
    for (const auto& [key, text] : value.items()) {
      if (!text.is_string()) throw fail("metadata '", key, "' is not a string");
      metadata[key] = text.get<std::string>();
    }
    return metadata;
  }

  Entry parse_entry(const std::string& name, const json& value) const {
    const std::string where = "tensor '" + name + "': ";
    if (!value.is_object()) throw fail(where, "its entry is not a JSON object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field)) throw fail(where, "no '", field, "'");
    Entry entry{name, DType::f32, {}, 0, 0};

    const json& code = value["dtype"];
    const auto known = std::find_if(std::begin(kDTypeCodes), std::end(kDTypeCodes), [&](const auto& pair) {
      return code.is_string() && code.get<std::string>() == pair.second;
    });
    if (known == std::end(kDTypeCodes)) throw fail(where, "unknown dtype ", code.dump());
    entry.dtype = known->first;

    const json& shape = value["shape"];
    if (!shape.is_array()) throw fail(where, "'shape' is not an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& size : shape) {
      if (!size.is_number_unsigned() || size.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw fail(where, "'shape' ", shape.dump(), " holds something other than a size");
      const uint64_t dim = size.get<uint64_t>();
      overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
      entry.shape.push_back(static_cast<int64_t>(dim));
    }

    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw fail(where, "'data_offsets' ", offsets.dump(), " is not a pair of offsets");
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    const uint64_t data_size = size_ - data_start_;
    if (entry.begin > entry.end || entry.end > data_size)
      throw fail(where, "data_offsets [", entry.begin, ", ", entry.end, "] lie outside the ", data_size,
                 "-byte data section");
    uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(itemsize(entry.dtype)), &nbytes);
    if (overflow || nbytes != entry.end - entry.begin)
      throw fail(where, "dtype ", code.get<std::string>(), " and shape ", shape.dump(), " need ",
                 overflow ? "more" : std::to_string(nbytes), " bytes, but data_offsets span ", entry.end - entry.begin);
    if (!fits_int64_indexing(entry.shape))  // e.g. [0, 2^32, 2^32]: no bytes, but strides past int64
      throw fail(where, "'shape' ", shape.dump(), " has strides beyond 2^63 - 1");
    return entry;
  }

  Tensor read_tensor(const Entry& entry) {
    Tensor t = empty(entry.shape, {entry.dtype, Device::cpu()});
    read_at(data_start_ + entry.begin, t.raw_data(), entry.end - entry.begin);
    if (entry.dtype == DType::boolean) {
      const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
      if (std::any_of(bytes, bytes + t.numel(), [](unsigned char b) { return b > 1; }))
        throw fail("tensor '", entry.name, "': a BOOL byte is neither 0 nor 1");
    }
    return t;
  }

  std::string path_;
  struct Close {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::unique_ptr<std::FILE, Close> file_;
  uint64_t size_ = 0;
  uint64_t data_start_ = 0;
};
}  // namespace

SafetensorsFile load_safetensors(const std::string& path) { return Reader(path).read(); }

}  // namespace sg
