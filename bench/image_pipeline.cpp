// bench_image_pipeline: images/s of the image training input pipeline, per worker thread — decode
// (read_image) + RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize, as
// ImageFolder runs it in a DataLoader worker — on Fashion-MNIST images written for the run:
// the 28 x 28 grey PNGs of export_fashion_mnist, the same as JPEGs, and JPEGs scaled to a photo's
// 500 x 375 in colour (what an ImageNet-style folder holds). Then the ResNet34 training step at
// 224 x 224 that the pipeline must feed, and how many worker threads that takes.
//   bench_image_pipeline --images 300 --resnet-batch 8 --threads 2
// docs/performance.md ("Image pipeline") has the numbers measured here.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "models/resnet.h"
#include "nn/functional.h"
#include "syncgrad.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string data_dir = sg::data::FashionMNIST::kDefaultRoot;
  std::string workdir;  // empty: a fresh directory under the system's temporary directory
  int64_t images = 300;
  double seconds = 1.0;      // at least this long per measurement
  int64_t resnet_batch = 8;  // 0: skip the ResNet34 step
  int resnet_steps = 2;
  int threads = 2;  // the ResNet34 step's intra-op threads
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// CPU time of the calling thread: on a shared, loaded machine the wall time of a single-threaded
// loop includes the time other processes held the core; the thread's CPU time does not.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct PerItem {
  double wall_ms, cpu_ms;
};

// Calls `once(i)` for i = 0, 1, ... over `count` items, round after round, for at least `seconds`.
template <typename F>
PerItem time_per_item(int64_t count, double seconds, F&& once) {
  const Clock::time_point start = Clock::now();
  const double cpu_start = thread_cpu_seconds();
  int64_t done = 0;
  do {
    for (int64_t i = 0; i < count; ++i) once(i);
    done += count;
  } while (seconds_since(start) < seconds);
  const auto items = static_cast<double>(done);
  return {seconds_since(start) * 1e3 / items, (thread_cpu_seconds() - cpu_start) * 1e3 / items};
}

// The first `count` test images, as grey PNGs, grey JPEGs, and colour 500 x 375 JPEGs.
void write_sets(const std::string& workdir, const Options& options) {
  const sg::data::FashionMNIST test(options.data_dir, false);
  std::vector<std::string> classes;
  for (size_t label = 0; label < sg::data::FashionMNIST::classes().size(); ++label)
    classes.push_back("class_" + std::to_string(label));
  sg::data::write_image_folder(workdir + "/png", test.images(), test.labels(), classes, options.images,
                               sg::data::ImageFormat::png, 1);
  sg::data::write_image_folder(workdir + "/jpeg", test.images(), test.labels(), classes, options.images,
                               sg::data::ImageFormat::jpeg, 1);
  // Photo-sized colour JPEGs: each image tinted into RGB (R = v, G = 3v/4, B = 255 - v) and
  // enlarged to 375 x 500 with the same resampler, then written at quality 95.
  const sg::Tensor pixels = test.images().contiguous();
  for (int64_t i = 0; i < options.images; ++i) {
    sg::Tensor rgb = sg::empty({28, 28, 3}, {sg::DType::u8, sg::Device::cpu()});
    const uint8_t* grey = pixels.data_ptr<uint8_t>() + i * 28 * 28;
    uint8_t* out = rgb.data_ptr<uint8_t>();
    for (int64_t p = 0; p < 28 * 28; ++p) {
      out[3 * p] = grey[p];
      out[3 * p + 1] = static_cast<uint8_t>(grey[p] * 3 / 4);
      out[3 * p + 2] = static_cast<uint8_t>(255 - grey[p]);
    }
    const std::string folder = workdir + "/photo/" + classes[static_cast<size_t>(test.labels().data_ptr<int64_t>()[i])];
    std::filesystem::create_directories(folder);
    sg::data::write_jpeg(folder + "/" + std::to_string(i) + ".jpg", sg::data::resize_bilinear(rgb, 375, 500), 95);
  }
}

struct PipelineTimes {
  PerItem decode, transforms, total;
};

PipelineTimes time_pipeline(const std::string& root, const Options& options) {
  const sg::data::Compose transforms({sg::data::RandomResizedCrop(224), sg::data::RandomHorizontalFlip(),
                                      sg::data::ToTensor(),
                                      sg::data::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})});
  const sg::data::ImageFolder folder(root, transforms);
  const int64_t count = folder.size();
  std::vector<sg::Tensor> decoded(static_cast<size_t>(count));
  const PerItem decode = time_per_item(count, options.seconds, [&](int64_t i) {
    decoded[static_cast<size_t>(i)] = sg::data::read_image(folder.files()[static_cast<size_t>(i)].path);
  });
  const PerItem transform = time_per_item(count, options.seconds, [&](int64_t i) {
    sg::Generator generator = sg::data::example_generator(0, 0, i);
    transforms(decoded[static_cast<size_t>(i)], generator);
  });
  const PerItem total = time_per_item(count, options.seconds, [&](int64_t i) {
    sg::Generator generator = sg::data::example_generator(0, 0, i);
    folder.get_augmented(i, generator);
  });
  return {decode, transform, total};
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Wall and CPU (all threads) milliseconds of one ResNet34 training step (forward, cross-entropy,
// backward) at 224 x 224.
PerItem time_resnet_step(const Options& options) {
  sg::set_num_threads(options.threads);
  sg::Generator generator(0);
  auto model = sg::models::resnet34({.num_classes = 10, .generator = &generator});
  model->train();
  const sg::Tensor input = sg::randn({options.resnet_batch, 3, 224, 224}, {}, &generator);
  const sg::Tensor target = sg::randint(0, 10, {options.resnet_batch}, {sg::DType::i64}, &generator);
  const auto step = [&] {
    model->zero_grad();
    sg::nn::functional::cross_entropy(model->forward(input), target).backward();
  };
  step();  // warm-up: first-touch allocations, oneDNN primitive creation
  const Clock::time_point start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (int s = 0; s < options.resnet_steps; ++s) step();
  return {seconds_since(start) * 1e3 / options.resnet_steps,
          (process_cpu_seconds() - cpu_start) * 1e3 / options.resnet_steps};
}

int run(const Options& options) {
  const std::string workdir =
      options.workdir.empty()
          ? (std::filesystem::temp_directory_path() / ("sg_bench_image_pipeline_" + std::to_string(::getpid())))
                .string()
          : options.workdir;
  std::filesystem::create_directories(workdir);
  write_sets(workdir, options);
  std::printf(
      "%lld images per set, one thread, each measurement at least %.1f s; CPU ms of the thread "
      "(wall ms in brackets: more when other processes share the cores)\n",
      static_cast<long long>(options.images), options.seconds);
  std::printf(
      "| images | decode ms/img | transforms ms/img | decode + transforms ms/img | images/s per worker thread |\n");
  std::printf("|---|---|---|---|---|\n");
  double slowest_ms = 0;
  for (const auto& [name, label] : {std::pair{"png", "28 x 28 grey PNG"}, std::pair{"jpeg", "28 x 28 grey JPEG"},
                                    std::pair{"photo", "500 x 375 colour JPEG"}}) {
    const PipelineTimes t = time_pipeline(workdir + "/" + name, options);
    std::printf("| %s | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.0f |\n", label, t.decode.cpu_ms, t.decode.wall_ms,
                t.transforms.cpu_ms, t.transforms.wall_ms, t.total.cpu_ms, t.total.wall_ms, 1e3 / t.total.cpu_ms);
    slowest_ms = std::max(slowest_ms, t.total.cpu_ms);
  }
  if (options.workdir.empty()) std::filesystem::remove_all(workdir);
  if (options.resnet_batch > 0) {
    const PerItem step = time_resnet_step(options);
    // With the cores to itself the step would take its CPU time spread over its threads.
    const double step_ms = step.cpu_ms / options.threads;
    const double needed = 1e3 * static_cast<double>(options.resnet_batch) / step_ms;  // images/s the step consumes
    std::printf(
        "ResNet34 training step (forward + backward), batch %lld at 224 x 224, %d threads: %.0f ms wall, "
        "%.0f CPU ms; on idle cores %.0f ms, %.1f images/s\n",
        static_cast<long long>(options.resnet_batch), options.threads, step.wall_ms, step.cpu_ms, step_ms, needed);
    std::printf("worker threads that keep it fed with the slowest set: %.3f (one worker, busy %.1f%% of the time)\n",
                needed * slowest_ms / 1e3, 100.0 * needed * slowest_ms / 1e3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"Image input pipeline throughput per worker thread, and the ResNet34 step it feeds"};
  app.add_option("--data-dir", options.data_dir, "Directory with the Fashion-MNIST IDX files")->capture_default_str();
  app.add_option("--workdir", options.workdir,
                 "Where to write the image sets (default: a temporary directory, removed)");
  app.add_option("--images", options.images, "Images per set")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--seconds", options.seconds, "Minimum time per measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--resnet-batch", options.resnet_batch, "ResNet34 batch size (0: skip the step)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--resnet-steps", options.resnet_steps, "Timed ResNet34 steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", options.threads, "Intra-op threads of the ResNet34 step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_image_pipeline: %s\n", error.what());
    return 1;
  }
}
