#include "train/data_parallel_check.h"

#include <cstdlib>

#include "core/error.h"
#include "dist/environment.h"

namespace sg::dist {

namespace {

int64_t positive_whole_number(const std::string& name, const std::string& text) {
  int64_t value = 0;
  SG_CHECK(parse_whole(text, value) && value > 0, "sgrun --verify: ", name, "='", text,
           "' is not a positive whole number");
  return value;
}

}  // namespace

DataParallelCheck data_parallel_check_from_environment(const VariableLookup& lookup) {
  const VariableLookup get = lookup ? lookup : [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  };
  DataParallelCheck check;
  const auto steps = get("SG_VERIFY_STEPS");
  if (!steps) return check;
  check.steps = positive_whole_number("SG_VERIFY_STEPS", *steps);
  if (const auto scale = get("SG_VERIFY_BATCH_SCALE"))
    check.batch_scale = positive_whole_number("SG_VERIFY_BATCH_SCALE", *scale);
  const auto output = get("SG_VERIFY_OUTPUT");
  SG_CHECK(output && !output->empty(),
           "sgrun --verify: SG_VERIFY_STEPS is set but SG_VERIFY_OUTPUT, the file to save "
           "the model's state to, is not");
  check.output = *output;
  return check;
}

}  // namespace sg::dist
