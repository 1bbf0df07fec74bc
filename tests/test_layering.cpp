// The layering rule, checked rather than hoped for: a library file includes headers of its own
// layer and of the layers below it only —
//   core <- autograd <- nn <- {optim <- amp, models} <- dist <- {launch, train} <- apps,
//   data <- core only, log <- core only
// (amp sits above optim because GradScaler::step takes an optimizer; dist and above may use data and
// log). dist/ stands above optim, amp and models in the order but needs none of them, and is kept
// so: collectives and DDP know no optimizer or loss scaler (the scaler's cross-rank agreement is
// given to it from train/). Inside core, the CUDA runtime (core/cuda_runtime/: device, allocator, stream, event, below
// Storage) includes no kernel layer, and the CUDA kernels (core/cuda/) are reached only through
// the dispatch of core/kernels/. The library never includes syncgrad.h, the header for programs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace {

const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"core", {"core"}},
    {"autograd", {"core", "autograd"}},
    {"nn", {"core", "autograd", "nn"}},
    {"optim", {"core", "autograd", "nn", "optim"}},
    {"amp", {"core", "autograd", "nn", "optim", "amp"}},
    {"models", {"core", "autograd", "nn", "optim", "amp", "models"}},
    {"data", {"core", "data"}},
    {"log", {"core", "log"}},
    {"dist", {"core", "autograd", "nn", "data", "log", "dist"}},
    {"launch", {"core", "autograd", "nn", "optim", "amp", "models", "data", "log", "dist", "launch"}},
    {"train", {"core", "autograd", "nn", "optim", "amp", "models", "data", "log", "dist", "train"}},
    {"apps", {"core", "autograd", "nn", "optim", "amp", "models", "data", "log", "dist", "launch", "train", "apps"}},
};

bool is_source(const std::filesystem::path& path) {
  static const std::set<std::string> extensions = {".h", ".cpp", ".cu", ".cuh"};
  return extensions.contains(path.extension().string());
}

// Calls `visit(file, line_number, line)` for every line of every source file under root/folder.
int for_each_line(const std::filesystem::path& root, const std::string& folder,
                  const std::function<void(const std::string&, int, const std::string&)>& visit) {
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
    if (!entry.is_regular_file() || !is_source(entry.path())) continue;
    ++files;
    std::ifstream file(entry.path());
    const std::string name = std::filesystem::relative(entry.path(), root).string();
    int line_number = 0;
    for (std::string line; std::getline(file, line);) visit(name, ++line_number, line);
  }
  return files;
}

// Outside core/cuda/, only a dispatch file, core/kernels/<area>.cpp, includes a CUDA kernel header: the
// declarations of its own area's kernels, core/cuda/<area>_kernels.h (Note [Kernel dispatch] in core/device.h).
bool may_include_cuda_header(const std::string& file, const std::string& header) {
  if (file.starts_with("core/cuda/")) return true;
  const std::filesystem::path path(file);
  return path.parent_path() == "core/kernels" && path.extension() == ".cpp" &&
         header == path.stem().string() + "_kernels.h";
}

}  // namespace

TEST_CASE("no library file includes a header of a higher layer") {
  const std::filesystem::path root = SG_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s*"([a-z_]+)/[^"]+\")");
  int files = 0;
  std::string violations;
  for (const auto& [layer, allowed] : kMayInclude) {
    REQUIRE(std::filesystem::is_directory(root / layer));
    files += for_each_line(root, layer, [&](const std::string& file, int line_number, const std::string& line) {
      const std::string where = file + ":" + std::to_string(line_number);
      std::smatch match;
      if (layer != "apps" && line.find("#include \"syncgrad.h\"") != std::string::npos)
        violations += where + ": includes syncgrad.h, the header for programs\n";
      else if (std::regex_search(line, match, include_line) && kMayInclude.contains(match[1]) &&
               !allowed.contains(match[1]))
        violations += where + ": " + layer + "/ includes " + std::string(match[1]) + "/, a higher layer\n";
    });
  }
  CHECK(files > 100);  // the walk really saw the library
  CHECK_MESSAGE(violations.empty(), "the layering rule (docs/decisions.md, \"The layers depend one way\") is broken:\n",
                violations);
}

TEST_CASE("the CUDA runtime includes no kernel layer, and outside core/cuda/ only the dispatch includes its headers") {
  const std::filesystem::path root = SG_SOURCE_DIR;
  const std::regex core_include(R"(^\s*#\s*include\s*"core/(cuda|cuda_runtime|kernels|cpu)/([^"]+)\")");
  std::string violations;
  const int runtime_files =
      for_each_line(root, "core/cuda_runtime", [&](const std::string& file, int line_number, const std::string& line) {
        std::smatch match;
        if (std::regex_search(line, match, core_include) && match[1] != "cuda_runtime")
          violations += file + ":" + std::to_string(line_number) + ": the runtime includes core/" +
                        std::string(match[1]) + "/, a kernel layer above Storage\n";
      });
  CHECK(runtime_files >= 10);
  for (const auto& [layer, allowed] : kMayInclude) {
    for_each_line(root, layer, [&](const std::string& file, int line_number, const std::string& line) {
      std::smatch match;
      if (std::regex_search(line, match, core_include) && match[1] == "cuda" &&
          !may_include_cuda_header(file, match[2]))
        violations += file + ":" + std::to_string(line_number) + ": includes core/cuda/" + std::string(match[2]) +
                      "; kernels are reached through core/kernels/, whose <area>.cpp alone includes "
                      "core/cuda/<area>_kernels.h (Note [Kernel dispatch] in core/device.h)\n";
    });
  }
  CHECK_MESSAGE(violations.empty(), "the core/ sub-layers (docs/decisions.md) are broken:\n", violations);
}

TEST_CASE("a failure without a condition is SG_FAIL, not SG_CHECK(false, ...) or a hand-built sg::Error") {
  // One spelling for "fail here with this message" (core/error.h) keeps the reporting path one
  // a reader can follow; a rethrown, already-built message (throw Error(message)) is not a new
  // failure. core/error.h defines SG_FAIL itself.
  const std::filesystem::path root = SG_SOURCE_DIR;
  const std::regex hand_built(R"(SG_CHECK\(false|throw\s+(::)?(sg::)?Error\((.*concat\(|.*"\s*\+))");
  std::string violations;
  for (const auto& entry : kMayInclude)
    for_each_line(root, entry.first, [&](const std::string& file, int line_number, const std::string& line) {
      if (file != "core/error.h" && std::regex_search(line, hand_built))
        violations += file + ":" + std::to_string(line_number) + "\n";
    });
  CHECK_MESSAGE(violations.empty(), "use SG_FAIL(...) at:\n", violations);
}
