// The layering rule, checked rather than hoped for: a library file includes headers of its own
// layer and of the layers below it only —
//   core <- autograd <- nn <- optim <- amp <- dist <- models <- apps,   data <- core only
// (amp sits above optim because GradScaler::step takes an optimizer; dist may use data for the
// DataLoader's placement). The library never includes syncgrad.h, the header for programs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
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
    {"data", {"core", "data"}},
    {"dist", {"core", "autograd", "nn", "optim", "amp", "data", "dist"}},
    {"models", {"core", "autograd", "nn", "optim", "amp", "data", "dist", "models"}},
    {"apps", {"core", "autograd", "nn", "optim", "amp", "data", "dist", "models", "apps"}},
};

bool is_source(const std::filesystem::path& path) {
  static const std::set<std::string> extensions = {".h", ".cpp", ".cu", ".cuh"};
  return extensions.contains(path.extension().string());
}

}  // namespace

TEST_CASE("no library file includes a header of a higher layer") {
  const std::filesystem::path root = SG_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s*"([a-z_]+)/[^"]+\")");
  int files = 0;
  std::string violations;
  for (const auto& [layer, allowed] : kMayInclude) {
    REQUIRE(std::filesystem::is_directory(root / layer));
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / layer)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      ++files;
      std::ifstream file(entry.path());
      int line_number = 0;
      for (std::string line; std::getline(file, line);) {
        ++line_number;
        const std::string where =
            std::filesystem::relative(entry.path(), root).string() + ":" + std::to_string(line_number);
        std::smatch match;
        if (layer != "apps" && line.find("#include \"syncgrad.h\"") != std::string::npos)
          violations += where + ": includes syncgrad.h, the header for programs\n";
        else if (std::regex_search(line, match, include_line) && kMayInclude.contains(match[1]) &&
                 !allowed.contains(match[1]))
          violations += where + ": " + layer + "/ includes " + std::string(match[1]) + "/, a higher layer\n";
      }
    }
  }
  CHECK(files > 100);  // the walk really saw the library
  CHECK_MESSAGE(violations.empty(), "the layering rule (docs/decisions.md, \"The layers depend one way\") is broken:\n",
                violations);
}
