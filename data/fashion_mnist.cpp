#include "data/fashion_mnist.h"

#include <filesystem>

#include "core/factory.h"
#include "data/idx.h"

namespace sg::data {

namespace {

constexpr int64_t kSide = 28;
constexpr int64_t kClasses = 10;

// `root`/`name`.gz if it exists, else `root`/`name` if that exists; otherwise an error with the fix.
std::string find_file(const std::string& root, const std::string& name) {
  const std::filesystem::path raw = std::filesystem::path(root) / name;
  const std::filesystem::path compressed = raw.string() + ".gz";
  if (std::filesystem::exists(compressed)) return compressed.string();
  if (std::filesystem::exists(raw)) return raw.string();
  SG_FAIL("FashionMNIST: neither ", compressed.string(), " nor ", raw.string(),
          " exists; install the Debian package dataset-fashion-mnist (scripts/setup.sh does)");
}

TensorDataset load(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(root, prefix + "-labels-idx1-ubyte");
  const Tensor images = read_idx(images_path, 3);
  const Tensor label_bytes = read_idx(labels_path, 1);
  const int64_t count = images.size(0);
  SG_CHECK(images.size(1) == kSide && images.size(2) == kSide, "FashionMNIST: ", images_path,
           ": expected 28x28 images, found ", shape_str(images.sizes()));
  SG_CHECK(label_bytes.size(0) == count, "FashionMNIST: ", images_path, " holds ", count, " images but ", labels_path,
           " holds ", label_bytes.size(0), " labels");

  Tensor labels = empty({count}, {DType::i64, Device::cpu()});
  const uint8_t* source = label_bytes.data_ptr<uint8_t>();
  int64_t* target = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    SG_CHECK(source[i] < kClasses, "FashionMNIST: ", labels_path, ": label ", int(source[i]), " of example ", i,
             " is not a class in [0, ", kClasses, ")");
    target[i] = source[i];
  }
  // The same bytes seen as [N, 1, 28, 28]: one grey channel, so an example is already [C, H, W].
  const Shape with_channel{count, 1, kSide, kSide};
  Tensor pixels(
      std::make_shared<TensorImpl>(images.storage(), 0, with_channel, contiguous_strides(with_channel), DType::u8));
  return TensorDataset(std::move(pixels), std::move(labels));
}

}  // namespace

const std::array<const char*, 10>& FashionMNIST::classes() {
  static const std::array<const char*, 10> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

FashionMNIST::FashionMNIST(const std::string& root, bool train, Transform transform)
    : examples_(load(root, train)),
      transform_(std::move(transform)) {}

Example FashionMNIST::get(int64_t index) const {
  Example raw = examples_.get(index);
  Tensor image = ToFloat{}(raw.input);
  if (transform_) image = transform_(image);
  return {std::move(image), std::move(raw.target)};
}

}  // namespace sg::data
