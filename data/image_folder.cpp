#include "data/image_folder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/factory.h"
#include "data/char_dataset.h"
#include "data/image.h"
#include "data/plain_copy.h"
#include "data/sampler.h"

namespace sg::data {

namespace fs = std::filesystem;

namespace {

bool is_hidden(const fs::path& path) { return path.filename().string().starts_with('.'); }

// The image files under one class folder, in torchvision's order (sorted(os.walk(...)), then the
// names sorted within each folder): by containing folder, then by name. Hidden files and folders
// are skipped.
std::vector<std::string> class_files(const fs::path& folder) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, name)
  auto it = fs::recursive_directory_iterator(folder, fs::directory_options::follow_directory_symlink);
  for (; it != fs::recursive_directory_iterator(); ++it) {
    if (is_hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && has_image_extension(it->path().filename().string()))
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (const auto& [directory, name] : found) paths.push_back((fs::path(directory) / name).string());
  return paths;
}

// `label` as the i64 scalar a target is (written here, not by a kernel: Note [Data code
// does not use the thread pool]).
Tensor label_tensor(int64_t label) {
  Tensor target = empty({}, {DType::i64, Device::cpu()});
  target.data_ptr<int64_t>()[0] = label;
  return target;
}

// The files that decode, warning about each one that does not.
std::vector<ImageFile> decodable(std::vector<ImageFile> files, int64_t& skipped) {
  std::vector<ImageFile> kept;
  kept.reserve(files.size());
  for (ImageFile& file : files) {
    try {
      read_image(file.path);
      kept.push_back(std::move(file));
    } catch (const Error& error) {
      std::cerr << "warning: ImageFolder: skipping a file: " << error.what() << "\n";
      ++skipped;
    }
  }
  if (skipped > 0)
    std::cerr << "ImageFolder: skipped " << skipped << " of " << skipped + static_cast<int64_t>(kept.size())
              << " files that are not decodable images\n";
  return kept;
}

// list_image_folder once the root is known to be a directory.
ImageFolderListing list_classes_and_files(const std::string& root) {
  ImageFolderListing listing;
  for (const fs::directory_entry& entry : fs::directory_iterator(root))
    if (entry.is_directory() && !is_hidden(entry.path())) listing.classes.push_back(entry.path().filename().string());
  SG_CHECK(!listing.classes.empty(), "ImageFolder: '", root, "' has no class folders (expected ", root,
           "/<class name>/<image files>)");
  std::sort(listing.classes.begin(), listing.classes.end());
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    const fs::path folder = fs::path(root) / listing.classes[label];
    const std::vector<std::string> paths = class_files(folder);
    SG_CHECK(!paths.empty(), "ImageFolder: the class folder '", folder.string(),
             "' has no image files (.jpg, .jpeg, .png, .bmp or .gif)");
    for (const std::string& path : paths) listing.files.push_back({path, static_cast<int64_t>(label)});
  }
  return listing;
}

}  // namespace

ImageFolderListing list_image_folder(const std::string& root) {
  std::error_code error;
  SG_CHECK(fs::is_directory(root, error), "ImageFolder: '", root, "' is not a directory",
           error ? ": " + error.message() : "");
  try {
    return list_classes_and_files(root);
  } catch (const fs::filesystem_error& failure) {  // an unreadable folder below the root, say
    SG_FAIL("ImageFolder: cannot list '", root, "': ", failure.what());
  }
}

ImageFolder::ImageFolder(const std::string& root, RandomTransform transform, ImageFolderOptions options)
    : ImageFolder(list_image_folder(root), std::move(transform), options) {}

ImageFolder::ImageFolder(ImageFolderListing listing, RandomTransform transform, ImageFolderOptions options)
    : ImageFolder(std::move(listing.files), std::move(listing.classes), std::move(transform), options) {}

ImageFolder::ImageFolder(std::vector<ImageFile> files, std::vector<std::string> classes, RandomTransform transform,
                         ImageFolderOptions options)
    : files_(std::move(files)),
      classes_(std::move(classes)),
      transform_(std::move(transform)) {
  for (const ImageFile& file : files_)
    SG_CHECK(file.label >= 0 && file.label < static_cast<int64_t>(classes_.size()), "ImageFolder: '", file.path,
             "' has label ", file.label, " but there are ", classes_.size(), " classes");
  if (options.skip_bad_files) files_ = decodable(std::move(files_), skipped_files_);
}

Example ImageFolder::get(int64_t index) const {
  Generator generator = example_generator(0, 0, index);
  return get_augmented(index, generator);
}

Example ImageFolder::get_augmented(int64_t index, Generator& generator) const {
  SG_CHECK(index >= 0 && index < size(), "ImageFolder: index ", index, " is out of range for ", size(), " images");
  const ImageFile& file = files_[static_cast<size_t>(index)];
  Tensor image = read_image(file.path);
  if (transform_) image = transform_(image, generator);
  return {std::move(image), label_tensor(file.label)};
}

namespace {

// The label -> name map as JSON ({"0": "daisy", ...}, labels in order, as the recipe's), written
// atomically. JSON holds UTF-8 text only, and a folder name is any bytes: a name that is not UTF-8
// is refused naming the folder, before the first epoch rather than as a bare JSON exception.
void write_class_indices(const std::string& path, const std::string& root, const std::vector<std::string>& classes) {
  nlohmann::ordered_json indices = nlohmann::ordered_json::object();
  for (size_t label = 0; label < classes.size(); ++label) {
    try {
      decode_utf8(classes[label], "name");
    } catch (const Error& error) {
      SG_FAIL("split_image_folder: the class folder '", root, "/", classes[label], "' cannot be named in ", path,
              ": its name is not UTF-8 (", error.what(), "); rename the folder");
    }
    indices[std::to_string(label)] = classes[label];
  }
  const std::string text = indices.dump(4) + "\n";
  write_file_atomically(path, [&](const ByteWriter& write) { write(text.data(), text.size()); });
}

}  // namespace

ImageFolderSplit split_image_folder(const std::string& root, double val_fraction, uint64_t seed,
                                    const std::string& class_indices_path, std::ostream* report) {
  SG_CHECK(val_fraction >= 0.0 && val_fraction <= 1.0, "split_image_folder: val_fraction must be in [0, 1], got ",
           val_fraction);
  ImageFolderListing listing = list_image_folder(root);
  ImageFolderSplit split;
  Generator generator(seed);
  size_t start = 0;
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    size_t end = start;
    while (end < listing.files.size() && listing.files[end].label == static_cast<int64_t>(label)) ++end;
    const auto count = static_cast<int64_t>(end - start);
    const auto val_count = static_cast<int64_t>(static_cast<double>(count) * val_fraction);  // the recipe's int()
    std::vector<bool> to_val(static_cast<size_t>(count), false);
    const std::vector<int64_t> order = random_permutation(count, generator);
    for (int64_t i = 0; i < val_count; ++i) to_val[static_cast<size_t>(order[i])] = true;
    for (int64_t i = 0; i < count; ++i)
      (to_val[static_cast<size_t>(i)] ? split.val : split.train).push_back(listing.files[start + i]);
    if (report)
      *report << "class " << label << " '" << listing.classes[label] << "': " << count << " images, "
              << count - val_count << " for training, " << val_count << " for validation\n";
    start = end;
  }
  if (report)
    *report << listing.files.size() << " images were found in '" << root << "': " << split.train.size()
            << " for training, " << split.val.size() << " for validation\n";
  if (!class_indices_path.empty()) write_class_indices(class_indices_path, root, listing.classes);
  split.classes = std::move(listing.classes);
  return split;
}

void write_image_folder(const std::string& root, const Tensor& images, const Tensor& labels,
                        const std::vector<std::string>& class_names, int64_t count, ImageFormat format, int threads) {
  SG_CHECK(images.dtype() == DType::u8 && images.dim() == 4 && (images.size(1) == 1 || images.size(1) == 3),
           "write_image_folder: expected u8 images [N, C, H, W] with C = 1 or 3, got ", shape_str(images.sizes()), " ",
           images.dtype());
  SG_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == images.size(0),
           "write_image_folder: expected i64 labels [", images.size(0), "], got ", shape_str(labels.sizes()), " ",
           labels.dtype());
  SG_CHECK(count >= 0 && count <= images.size(0), "write_image_folder: count ", count, " is not in [0, ",
           images.size(0), "]");
  SG_CHECK(threads >= 1, "write_image_folder: threads must be at least 1, got ", threads);
  const Tensor pixels = contiguous_plain(images), classes = contiguous_plain(labels);
  const int64_t channels = images.size(1), height = images.size(2), width = images.size(3);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = classes.data_ptr<int64_t>()[i];
    SG_CHECK(label >= 0 && label < static_cast<int64_t>(class_names.size()), "write_image_folder: image ", i,
             " has label ", label, " but there are ", class_names.size(), " class names");
  }
  for (const std::string& name : class_names) fs::create_directories(fs::path(root) / name);

  std::atomic<int64_t> next = 0;
  std::atomic<bool> failed = false;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto work = [&] {
    Tensor image = empty({height, width, channels}, {DType::u8, Device::cpu()});  // HWC, as the writers take
    for (int64_t i = next++; i < count && !failed; i = next++) {
      const uint8_t* source = pixels.data_ptr<uint8_t>() + i * channels * height * width;
      uint8_t* destination = image.data_ptr<uint8_t>();
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t p = 0; p < height * width; ++p) destination[p * channels + c] = source[c * height * width + p];
      const fs::path folder = fs::path(root) / class_names[static_cast<size_t>(classes.data_ptr<int64_t>()[i])];
      try {
        if (format == ImageFormat::png) write_png((folder / (std::to_string(i) + ".png")).string(), image);
        else write_jpeg((folder / (std::to_string(i) + ".jpg")).string(), image, 95);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!failed.exchange(true)) first_error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace sg::data
