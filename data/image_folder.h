#pragma once
// defines: ImageFile, ImageFolderOptions, ImageFolder, list_image_folder, ImageFolderSplit,
//          split_image_folder, ImageFormat, write_image_folder — a data set of image files sorted
//          into one folder per class (torchvision.datasets.ImageFolder), the per-class train /
//          validation split of the ResNet recipe's read_split_data, and the writer of such a folder.
//
//   root/daisy/100080576_f52e8ee070_n.jpg      classes: sorted folder names -> labels 0..K-1
//   root/daisy/...                              files: .jpg .jpeg .png .bmp .gif (any letter
//   root/roses/...                                     case), sorted; hidden ones are ignored
//
//   data::ImageFolder train(root, data::Compose({data::RandomResizedCrop(224), data::RandomHorizontalFlip(),
//                                                data::ToTensor(), data::Normalize(mean, std)}));
//   data::DataLoader loader(std::make_shared<data::ImageFolder>(std::move(train)),
//                           {.batch_size = 32, .shuffle = true, .num_workers = 2, .seed = 1});
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace sg::data {

// One example: the file and its class index.
struct ImageFile {
  std::string path;
  int64_t label = 0;
  bool operator==(const ImageFile&) const = default;
};

struct ImageFolderOptions {
  // false: a file that cannot be decoded fails get() with an error naming it (torchvision's
  // behaviour). true: the constructor decodes every file once and leaves out those that fail,
  // printing one warning line each to std::cerr and then how many were left out.
  bool skip_bad_files = false;
};

// The class folders of `root` (sorted names; hidden ones ignored) and their image files, in
// torchvision's order: by class, then by folder within the class folder (they are searched
// recursively), then by name. Throws an sg::Error naming the path for a missing root, a root
// without class folders, or a class folder without image files.
struct ImageFolderListing {
  std::vector<std::string> classes;
  std::vector<ImageFile> files;
};
ImageFolderListing list_image_folder(const std::string& root);

class ImageFolder : public Dataset {
public:
  // Every image under `root` (list_image_folder).
  explicit ImageFolder(const std::string& root, RandomTransform transform = {}, ImageFolderOptions options = {});
  // The given files, e.g. one side of split_image_folder; `classes` names the labels.
  ImageFolder(std::vector<ImageFile> files, std::vector<std::string> classes, RandomTransform transform = {},
              ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  // {transform(read_image(file)), label as an i64 scalar}; without a transform the image is the
  // decoded u8 [H, W, 3]. get() draws from example_generator(0, 0, index); a DataLoader calls
  // get_augmented with the example's own generator (Note [Per-example random draws]).
  Example get(int64_t index) const override;
  Example get_augmented(int64_t index, Generator& generator) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<ImageFile>& files() const { return files_; }
  int64_t skipped_files() const { return skipped_files_; }  // left out by skip_bad_files

private:
  ImageFolder(ImageFolderListing listing, RandomTransform transform, ImageFolderOptions options);

  std::vector<ImageFile> files_;
  std::vector<std::string> classes_;
  RandomTransform transform_;
  int64_t skipped_files_ = 0;
};

// The recipe's read_split_data: in each class, int(count * val_fraction) files drawn at random
// (one Generator(seed) for all classes, in class order, so the split is fixed by the seed) go to
// `val`, the others to `train`, both keeping the listing's order. Writes the label -> class
// name map as JSON ({"0": "daisy", ...}, the recipe's class_indices.json) to
// `class_indices_path` unless it is empty, and prints each class's counts to `report` unless it
// is null.
struct ImageFolderSplit {
  std::vector<std::string> classes;
  std::vector<ImageFile> train;
  std::vector<ImageFile> val;
};
ImageFolderSplit split_image_folder(const std::string& root, double val_fraction, uint64_t seed,
                                    const std::string& class_indices_path = "", std::ostream* report = &std::cout);

enum class ImageFormat { png, jpeg };

// Writes image i of `images` (u8 [N, C, H, W], C = 1 or 3, e.g. FashionMNIST::images()) to
// root/<class_names[labels[i]]>/<i>.png (or .jpg, quality 95), creating the folders, for i < count,
// on `threads` threads (file creation dominates; the threads overlap it). The first error stops
// the others and is rethrown naming its file.
void write_image_folder(const std::string& root, const Tensor& images, const Tensor& labels,
                        const std::vector<std::string>& class_names, int64_t count, ImageFormat format, int threads);

}  // namespace sg::data
