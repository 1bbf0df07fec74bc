// ImageFolder and split_image_folder on folders the tests write, and the DataLoader's per-example
// generators (Note [Per-example random draws] in data/dataset.h) with random image transforms.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

Tensor random_image(int64_t height, int64_t width) {
  return randint(0, 256, {height, width, 3}, {DType::u8, Device::cpu()}, &test::rng());
}

// root/<class>/<name> for each (class, name), each a random PNG of a size varying with the name.
void write_tree(const std::string& root, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [class_name, name] : files) {
    const fs::path path = fs::path(root) / class_name / name;
    fs::create_directories(path.parent_path());
    data::write_png(path.string(), random_image(10 + static_cast<int64_t>(name.size() % 5), 12));
  }
}

std::string relative(const std::string& root, const std::string& path) { return fs::relative(path, root).string(); }

// `count` PNGs per class for the given class names.
std::string write_classes(const test::TempDir& dir, const std::map<std::string, int>& counts) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [class_name, count] : counts)
    for (int i = 0; i < count; ++i) files.emplace_back(class_name, "img" + std::to_string(100 + i) + ".png");
  write_tree(dir.path(), files);
  return dir.path();
}

}  // namespace

TEST_CASE("ImageFolder labels sorted class folders 0..K-1 and lists their image files in torchvision's order") {
  test::TempDir dir;
  const std::string root = dir.path();
  write_tree(root, {{"tulip", "b.png"},
                    {"tulip", "A.PNG"},
                    {"daisy", "z.jpg.png"},
                    {"daisy", "sub/c.png"},
                    {"daisy", "a.png"},
                    {"Rose", "x.Png"},
                    {"daisy", ".hidden.png"},
                    {".cache", "q.png"},
                    {"daisy", ".thumbs/t.png"}});
  std::ofstream(root + "/daisy/readme.txt") << "not an image";
  std::ofstream(root + "/loose.png") << "a file in the root is not a class";

  const data::ImageFolder folder(root);
  CHECK(folder.classes() == std::vector<std::string>{"Rose", "daisy", "tulip"});  // byte order, as Python's sort
  std::vector<std::pair<std::string, int64_t>> listed;
  for (const data::ImageFile& file : folder.files()) listed.emplace_back(relative(root, file.path), file.label);
  // Within a class: the class folder's own files, then each subfolder's (sorted(os.walk(...))).
  CHECK(listed == std::vector<std::pair<std::string, int64_t>>{{"Rose/x.Png", 0},
                                                               {"daisy/a.png", 1},
                                                               {"daisy/z.jpg.png", 1},
                                                               {"daisy/sub/c.png", 1},
                                                               {"tulip/A.PNG", 2},
                                                               {"tulip/b.png", 2}});
  CHECK(folder.size() == 6);
  const data::Example example = folder.get(3);
  CHECK(example.input.sizes() == Shape{10 + static_cast<int64_t>(std::string("sub/c.png").size() % 5), 12, 3});
  CHECK(example.input.dtype() == DType::u8);
  CHECK(example.target.dim() == 0);
  CHECK(example.target.dtype() == DType::i64);
  CHECK(test::values(example.target) == std::vector<double>{1});
}

TEST_CASE("ImageFolder applies its transform to the decoded image") {
  test::TempDir dir;
  const std::string root = write_classes(dir, {{"a", 2}, {"b", 1}});
  const data::ImageFolder folder(root, data::Compose({data::Resize({4, 6}), data::ToTensor()}));
  const data::Example example = folder.get(2);
  CHECK(example.input.sizes() == Shape{3, 4, 6});
  CHECK(example.input.dtype() == DType::f32);
  CHECK(test::max_abs_diff(example.input,
                           data::ToTensor()(data::Resize({4, 6})(data::read_image(folder.files()[2].path)))) == 0.0);
}

TEST_CASE("ImageFolder names the path of a missing root, a root without classes and an empty class folder") {
  test::TempDir dir;
  const std::string root = dir.path();
  CHECK_THROWS_WITH_AS(data::ImageFolder{root + "/nope"},
                       doctest::Contains(("ImageFolder: '" + root + "/nope' is not a directory").c_str()), Error);
  std::ofstream(root + "/file.png") << "x";
  fs::create_directories(root + "/.git");
  CHECK_THROWS_WITH_AS(data::ImageFolder{root},
                       doctest::Contains(("ImageFolder: '" + root + "' has no class folders").c_str()), Error);
  write_tree(root, {{"cat", "1.png"}});
  fs::create_directories(root + "/dog/empty_subfolder");
  std::ofstream(root + "/dog/notes.txt") << "no images here";
  CHECK_THROWS_WITH_AS(
      data::ImageFolder{root},
      doctest::Contains(("ImageFolder: the class folder '" + root + "/dog' has no image files").c_str()), Error);
}

TEST_CASE("a bad file fails get() naming it, or is skipped with a warning and a count when asked") {
  test::TempDir dir;
  const std::string root = write_classes(dir, {{"a", 3}, {"b", 2}});
  std::ofstream(root + "/a/broken.png") << "not a png";
  std::ofstream(root + "/b/empty.jpg");
  const data::ImageFolder strict(root);
  CHECK(strict.size() == 7);
  CHECK_THROWS_WITH_AS(strict.get(0), doctest::Contains(("cannot decode '" + root + "/a/broken.png'").c_str()), Error);

  std::stringstream captured;
  std::streambuf* previous = std::cerr.rdbuf(captured.rdbuf());
  const data::ImageFolder lenient(root, {}, {.skip_bad_files = true});
  std::cerr.rdbuf(previous);
  CHECK(lenient.size() == 5);
  CHECK(lenient.skipped_files() == 2);
  for (const data::ImageFile& file : lenient.files()) CHECK(file.path.find("img") != std::string::npos);
  const std::string log = captured.str();
  CHECK(log.find("warning: ImageFolder: skipping a file: read_image: cannot decode '" + root + "/a/broken.png'") !=
        std::string::npos);
  CHECK(log.find("warning: ImageFolder: skipping a file: read_image: '" + root + "/b/empty.jpg' is empty") !=
        std::string::npos);
  CHECK(log.find("ImageFolder: skipped 2 of 7 files that are not decodable images") != std::string::npos);
}

TEST_CASE("split_image_folder splits each class by the seed, writes class_indices.json and reports counts") {
  test::TempDir dir;
  const std::string root = write_classes(dir, {{"daisy", 10}, {"roses", 7}, {"tulips", 3}});
  const std::string json_path = dir.path() + "/class_indices.json";
  std::ostringstream report;
  const data::ImageFolderSplit split = data::split_image_folder(root, 0.2, 7, json_path, &report);

  CHECK(split.classes == std::vector<std::string>{"daisy", "roses", "tulips"});
  std::map<int64_t, int> train_count, val_count;
  for (const data::ImageFile& file : split.train) ++train_count[file.label];
  for (const data::ImageFile& file : split.val) ++val_count[file.label];
  // int(count * 0.2) per class, as the recipe's random.sample(images, k=int(len(images) * val_rate)).
  CHECK(val_count == std::map<int64_t, int>{{0, 2}, {1, 1}});
  CHECK(train_count == std::map<int64_t, int>{{0, 8}, {1, 6}, {2, 3}});
  std::set<std::string> all;
  for (const auto* side : {&split.train, &split.val})
    for (const data::ImageFile& file : *side) all.insert(file.path);
  CHECK(all.size() == 20);  // disjoint and complete
  CHECK(std::is_sorted(split.val.begin(), split.val.end(),
                       [](const data::ImageFile& a, const data::ImageFile& b) { return a.path < b.path; }));

  const data::ImageFolderSplit again = data::split_image_folder(root, 0.2, 7, "", nullptr);
  CHECK(again.val == split.val);
  CHECK(again.train == split.train);
  bool differs = false;  // another seed picks other files in at least one of a few tries
  for (uint64_t seed = 8; seed < 12 && !differs; ++seed)
    differs = data::split_image_folder(root, 0.2, seed, "", nullptr).val != split.val;
  CHECK(differs);

  std::ifstream json_file(json_path);
  const nlohmann::json indices = nlohmann::json::parse(json_file);
  CHECK(indices == nlohmann::json{{"0", "daisy"}, {"1", "roses"}, {"2", "tulips"}});
  CHECK(report.str().find("class 0 'daisy': 10 images, 8 for training, 2 for validation") != std::string::npos);
  CHECK(report.str().find("class 2 'tulips': 3 images, 3 for training, 0 for validation") != std::string::npos);
  CHECK(report.str().find("20 images were found") != std::string::npos);

  const data::ImageFolder val(split.val, split.classes);
  CHECK(val.size() == 3);
  CHECK(test::values(val.get(2).target) == std::vector<double>{1});
  CHECK_THROWS_WITH_AS(data::split_image_folder(root, 1.5, 0, "", nullptr), doctest::Contains("val_fraction"), Error);
}

TEST_CASE("random augmentations give identical batches with 0, 1 and 3 DataLoader workers, new ones each epoch") {
  test::TempDir dir;
  const std::string root = write_classes(dir, {{"a", 9}, {"b", 8}});
  const auto folder = std::make_shared<data::ImageFolder>(
      root, data::Compose({data::RandomResizedCrop(8), data::RandomHorizontalFlip(), data::ToTensor()}));
  // A Subset passes each example's generator on, so a split data set is augmented the same way.
  const auto subset = std::make_shared<data::Subset>(folder, std::vector<int64_t>{16, 3, 5, 0, 11, 7, 2});
  for (const std::shared_ptr<const data::Dataset>& dataset :
       std::vector<std::shared_ptr<const data::Dataset>>{folder, subset}) {
    std::vector<std::vector<Tensor>> passes;  // passes[w]: the batches of 2 epochs with workers[w]
    for (int workers : {0, 1, 3}) {
      data::DataLoader loader(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 5});
      std::vector<Tensor> batches;
      for (int epoch = 0; epoch < 2; ++epoch)
        for (const data::Batch& batch : loader) batches.push_back(batch.input);
      passes.push_back(batches);
    }
    for (size_t w = 1; w < passes.size(); ++w) {
      REQUIRE(passes[w].size() == passes[0].size());
      for (size_t b = 0; b < passes[0].size(); ++b) CHECK(test::max_abs_diff(passes[w][b], passes[0][b]) == 0.0);
    }
    CHECK(passes[0][0].sizes() == Shape{4, 3, 8, 8});
  }
  // Another epoch draws other crops of the same example; set_epoch replays an epoch's draws.
  data::DataLoader loader(folder, {.batch_size = 17, .num_workers = 2, .seed = 5});
  const Tensor epoch0 = (*loader.begin()).input;
  const Tensor epoch1 = (*loader.begin()).input;
  loader.set_epoch(0);
  const Tensor replayed = (*loader.begin()).input;
  CHECK(test::max_abs_diff(epoch0, epoch1) > 0.0);
  CHECK(test::max_abs_diff(epoch0, replayed) == 0.0);
}

TEST_CASE("write_image_folder writes each image under its class as PNG or JPEG, and ImageFolder reads them back") {
  test::TempDir dir;
  const Tensor images = randint(0, 256, {6, 1, 5, 4}, {DType::u8, Device::cpu()}, &test::rng());  // [N, C, H, W]
  const Tensor labels = tensor(std::vector<int64_t>{2, 0, 2, 1, 0, 2});
  const std::vector<std::string> names = {"zero", "one", "two"};
  data::write_image_folder(dir.path() + "/png", images, labels, names, 5, data::ImageFormat::png, 3);
  const data::ImageFolder folder(dir.path() + "/png");
  CHECK(folder.classes() == std::vector<std::string>{"one", "two", "zero"});
  std::vector<std::string> listed;
  for (const data::ImageFile& file : folder.files()) listed.push_back(relative(dir.path() + "/png", file.path));
  CHECK(listed == std::vector<std::string>{"one/3.png", "two/0.png", "two/2.png", "zero/1.png", "zero/4.png"});
  // Grey decodes to three equal channels: each channel of zero/4.png is image 4.
  const Tensor four = data::read_image(dir.path() + "/png/zero/4.png");
  const std::vector<double> pixels = test::values(four), expected = test::values(images.select(0, 4));
  for (size_t p = 0; p < expected.size(); ++p) CHECK(pixels[3 * p + 1] == expected[p]);

  // RGB images [N, 3, H, W] are written as the files' [H, W, 3].
  const Tensor rgb = randint(0, 256, {2, 3, 8, 8}, {DType::u8, Device::cpu()}, &test::rng());
  for (const data::ImageFormat format : {data::ImageFormat::png, data::ImageFormat::jpeg})
    data::write_image_folder(dir.path() + "/rgb", rgb, tensor(std::vector<int64_t>{0, 1}), names, 2, format, 1);
  CHECK(test::values(data::read_image(dir.path() + "/rgb/one/1.png")) ==
        test::values(rgb.select(0, 1).permute({1, 2, 0})));
  CHECK(data::read_image(dir.path() + "/rgb/one/1.jpg").sizes() == Shape{8, 8, 3});
  CHECK_THROWS_WITH_AS(data::write_image_folder(dir.path(), images, labels, {"only"}, 6, data::ImageFormat::png, 1),
                       doctest::Contains("image 0 has label 2 but there are 1 class names"), Error);
  CHECK_THROWS_WITH_AS(data::write_image_folder(dir.path(), images, labels, names, 7, data::ImageFormat::png, 1),
                       doctest::Contains("count 7 is not in [0, 6]"), Error);
}

TEST_CASE("split_image_folder refuses a class folder whose name is not UTF-8, naming it, and keeps the old JSON") {
  // JSON holds UTF-8 text; a folder name is any bytes. nlohmann::json would throw a bare
  // type_error mid-write; the folder is named instead, and the previous class_indices.json stays.
  test::TempDir dir;
  const std::string root = write_classes(dir, {{"daisy", 2},
                                               {"ros\xff"
                                                "es",
                                                2}});
  const std::string json_path = dir.path() + "/class_indices.json";
  std::ofstream(json_path) << "{\"0\": \"previous\"}\n";
  const std::string expected = "split_image_folder: the class folder '" + root + "/ros\xff" +
                               "es' cannot be named in " + json_path + ": its name is not UTF-8";
  CHECK_THROWS_WITH_AS(data::split_image_folder(root, 0.5, 0, json_path, nullptr), doctest::Contains(expected.c_str()),
                       Error);
  std::ifstream json_file(json_path);
  CHECK(std::string(std::istreambuf_iterator<char>(json_file), {}) == "{\"0\": \"previous\"}\n");
}
