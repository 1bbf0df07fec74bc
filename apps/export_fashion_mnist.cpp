// export_fashion_mnist: writes Fashion-MNIST as an image folder, real images for the ImageFolder
// pipeline (train_resnet, bench_image_pipeline) where no photo data set is installed:
//   <output>/train/<class>/<index>.png   (60,000)   <output>/test/<class>/<index>.png   (10,000)
// with the class names of torchvision's FashionMNIST.classes made file-name safe (T-shirt_top,
// Trouser, ..., Ankle_boot). `export_fashion_mnist --help` lists the flags.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "data/fashion_mnist.h"
#include "data/image_folder.h"

namespace {

struct Config {
  std::string data_dir = sg::data::FashionMNIST::kDefaultRoot;
  std::string output;
  bool jpeg = false;
  int64_t limit = 0;  // 0: every image
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

// "T-shirt/top" -> "T-shirt_top", "Ankle boot" -> "Ankle_boot".
std::vector<std::string> folder_names() {
  std::vector<std::string> names;
  for (std::string name : sg::data::FashionMNIST::classes()) {
    std::replace(name.begin(), name.end(), '/', '_');
    std::replace(name.begin(), name.end(), ' ', '_');
    names.push_back(name);
  }
  return names;
}

int run(const Config& config) {
  const auto start = std::chrono::steady_clock::now();
  int64_t written = 0;
  for (const bool train : {true, false}) {
    const sg::data::FashionMNIST split(config.data_dir, train);
    const int64_t count = config.limit > 0 ? std::min(config.limit, split.size()) : split.size();
    const std::string root = config.output + (train ? "/train" : "/test");
    sg::data::write_image_folder(root, split.images(), split.labels(), folder_names(), count,
                                 config.jpeg ? sg::data::ImageFormat::jpeg : sg::data::ImageFormat::png,
                                 config.threads);
    std::printf("%s: %lld images\n", root.c_str(), static_cast<long long>(count));
    written += count;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld %s files in %.1f s with %d threads\n", static_cast<long long>(written),
              config.jpeg ? "JPEG" : "PNG", seconds, config.threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Writes Fashion-MNIST as an image folder: <output>/<train|test>/<class>/<index>.png"};
  app.add_option("--data-dir", config.data_dir, "Directory with the Fashion-MNIST IDX files (.gz or raw)")
      ->capture_default_str();
  app.add_option("--output", config.output, "Root of the image folder to write")->required();
  app.add_flag("--jpeg", config.jpeg, "Write JPEGs (quality 95, <index>.jpg) instead of PNGs");
  app.add_option("--limit", config.limit, "Write only the first N images of each split (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--threads", config.threads, "Threads writing files")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(config);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "export_fashion_mnist: %s\n", error.what());
    return 1;
  }
}
