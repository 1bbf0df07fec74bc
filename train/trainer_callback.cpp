#include "train/trainer_callback.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace sg::dist {

namespace {

// JSON has no NaN or infinity: nlohmann writes them as null, read back here as NaN (a loss that
// diverged stays visible in the history of a resumed run).
double number(const nlohmann::json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

// The non-negative integer `key` of `json`.
int64_t count(const nlohmann::json& json, const char* key) {
  const auto value = json.at(key).get<int64_t>();
  SG_CHECK(value >= 0, "TrainerState::from_json: ", key, " ", value, " is negative");
  return value;
}

}  // namespace

std::string TrainerState::to_json() const {
  nlohmann::json json{{"epoch", epoch},
                      {"global_step", global_step},
                      {"max_steps", max_steps},
                      {"num_train_epochs", num_train_epochs},
                      {"log_history", log_history},
                      {"best_metric", nullptr},
                      {"best_global_step", nullptr},
                      {"best_model_checkpoint", nullptr},
                      {"world_size", world_size}};
  if (best_metric) json["best_metric"] = *best_metric;
  if (best_global_step) json["best_global_step"] = *best_global_step;
  if (!best_model_checkpoint.empty()) json["best_model_checkpoint"] = best_model_checkpoint;
  return json.dump(2);
}

TrainerState TrainerState::from_json(const std::string& text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    TrainerState state;
    state.epoch = json.at("epoch").get<double>();
    SG_CHECK(std::isfinite(state.epoch) && state.epoch >= 0, "TrainerState::from_json: epoch ", state.epoch,
             " is not a count of epochs (>= 0)");
    state.global_step = count(json, "global_step");
    state.max_steps = count(json, "max_steps");
    state.num_train_epochs = count(json, "num_train_epochs");
    const int64_t world_size = json.value("world_size", int64_t{0});  // 0: saved before it was recorded
    SG_CHECK(!json.contains("world_size") || (world_size >= 1 && world_size <= std::numeric_limits<int>::max()),
             "TrainerState::from_json: world_size ", world_size, " is not a number of processes");
    state.world_size = static_cast<int>(world_size);
    for (const nlohmann::json& entry : json.at("log_history")) {
      Metrics& logs = state.log_history.emplace_back();
      for (const auto& [name, value] : entry.items()) logs[name] = number(value);
    }
    if (!json.at("best_metric").is_null()) state.best_metric = number(json.at("best_metric"));
    if (!json.at("best_global_step").is_null()) state.best_global_step = count(json, "best_global_step");
    if (!json.at("best_model_checkpoint").is_null())
      state.best_model_checkpoint = json.at("best_model_checkpoint").get<std::string>();
    return state;
  } catch (const nlohmann::json::exception& error) {
    SG_FAIL("TrainerState::from_json: ", error.what());
  }
}

}  // namespace sg::dist
