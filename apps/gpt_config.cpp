#include "apps/gpt_config.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <type_traits>

#include "core/error.h"
#include "data/dataloader.h"

namespace sg::apps::gpt {
namespace {

// One key of the file: how to read its YAML value into the config, and what it must be.
struct Key {
  std::string section, name, kind;  // kind: "an integer", "a number", "true or false", "a string"
  std::function<void(const YAML::Node&)> read;
};

template <typename T>
Key key(const std::string& section, const std::string& name, T& target) {
  std::string kind = std::is_same_v<T, bool>       ? "true or false"
                     : std::is_floating_point_v<T> ? "a number"
                     : std::is_integral_v<T>       ? "an integer"
                                                   : "a string";
  return {section, name, kind, [&target](const YAML::Node& node) { target = node.as<T>(); }};
}

Key optional_integer(const std::string& section, const std::string& name, std::optional<int64_t>& target) {
  return {section, name, "an integer", [&target](const YAML::Node& node) { target = node.as<int64_t>(); }};
}

std::vector<Key> keys_of(RunConfig& c) {
  return {key("data_config", "path", c.data.path),
          key("data_config", "block_size", c.data.block_size),
          key("data_config", "train_split", c.data.train_split),
          key("data_config", "truncate", c.data.truncate),
          key("gpt_config", "model_type", c.gpt.model_type),
          optional_integer("gpt_config", "n_layer", c.gpt.n_layer),
          optional_integer("gpt_config", "n_head", c.gpt.n_head),
          optional_integer("gpt_config", "n_embd", c.gpt.n_embd),
          key("gpt_config", "embd_pdrop", c.gpt.embd_pdrop),
          key("gpt_config", "resid_pdrop", c.gpt.resid_pdrop),
          key("gpt_config", "attn_pdrop", c.gpt.attn_pdrop),
          key("trainer_config", "max_epochs", c.trainer.max_epochs),
          key("trainer_config", "batch_size", c.trainer.batch_size),
          key("trainer_config", "data_loader_workers", c.trainer.data_loader_workers),
          key("trainer_config", "grad_norm_clip", c.trainer.grad_norm_clip),
          key("trainer_config", "snapshot_path", c.trainer.snapshot_path),
          key("trainer_config", "save_every", c.trainer.save_every),
          key("trainer_config", "save_every_steps", c.trainer.save_every_steps),
          key("trainer_config", "keep", c.trainer.keep),
          key("trainer_config", "use_amp", c.trainer.use_amp),
          key("trainer_config", "amp_dtype", c.trainer.amp_dtype),
          key("trainer_config", "amp_debug", c.trainer.amp_debug),
          key("trainer_config", "activation_checkpointing", c.trainer.activation_checkpointing),
          key("trainer_config", "gradient_accumulation_steps", c.trainer.gradient_accumulation_steps),
          key("trainer_config", "seed", c.trainer.seed),
          key("trainer_config", "log_path", c.trainer.log_path),
          key("trainer_config", "tensorboard_dir", c.trainer.tensorboard_dir),
          key("trainer_config", "sample_tokens", c.trainer.sample_tokens),
          key("trainer_config", "sample_prompt", c.trainer.sample_prompt),
          key("optimizer_config", "weight_decay", c.optimizer.weight_decay),
          key("optimizer_config", "learning_rate", c.optimizer.learning_rate)};
}

std::string known_keys(const std::vector<Key>& keys, const std::string& section) {
  std::string out;
  for (const Key& k : keys)
    if (section.empty() || k.section == section)
      out += (out.empty() ? "" : ", ") + (section.empty() ? k.section + "." : "") + k.name;
  return out;
}

const Key* find_key(const std::vector<Key>& keys, const std::string& section, const std::string& name) {
  for (const Key& k : keys)
    if (k.section == section && k.name == name) return &k;
  return nullptr;
}

// The recipe's file may carry Hydra's own section (where Hydra runs), which configures nothing here.
constexpr const char* kHydraSection = "hydra";

// Where each value came from, so that an error blames the command-line override that set a key,
// not the file that did not.
struct Origins {
  std::string path;
  std::map<std::string, std::string> overrides;  // "section.key" -> the override's text

  std::string of(const std::string& key) const {
    const auto it = overrides.find(key);
    return it == overrides.end() ? "config " + path : "override '" + it->second + "'";
  }
};

template <typename T>
void check_at_least(const Origins& origins, const std::string& key, T value, T minimum) {
  SG_CHECK(value >= minimum, origins.of(key), ": ", key, " must be >= ", minimum, ", got ", value);
}

// The sizes a model_type stands for (models::GPTConfig resolves them; n_layer, n_head, n_embd win).
constexpr const char* kModelSizes[] = {"n_layer", "n_head", "n_embd"};

RunConfig config_from(YAML::Node root, const std::string& path, const std::vector<std::string>& overrides) {
  RunConfig config;
  const std::vector<Key> keys = keys_of(config);
  SG_CHECK(root.IsMap(), "config ", path,
           ": expected sections data_config, gpt_config, trainer_config, optimizer_config");
  Origins origins{path, {}};
  for (const std::string& text : overrides) {
    const size_t equals = text.find('='), dot = text.find('.');
    SG_CHECK(equals != std::string::npos && dot != std::string::npos && dot < equals, "override '", text,
             "': expected section.key=value, e.g. trainer_config.max_epochs=2");
    const std::string section = text.substr(0, dot), name = text.substr(dot + 1, equals - dot - 1);
    SG_CHECK(find_key(keys, section, name) != nullptr, "override '", text, "': unknown key ", section, ".", name,
             " (known keys: ", known_keys(keys, ""), ")");
    root[section][name] = YAML::Load(text.substr(equals + 1));
    origins.overrides[section + "." + name] = text;
  }
  // The recipe lets n_layer / n_head / n_embd win over model_type. A model_type given on the
  // command line is meant to count, so the file's sizes go. Sizes given on the command line beside
  // it stay, and GPTConfig refuses a partial set: `model_type=gpt-nano n_layer=2` is an error, not
  // the file's width with 2 layers.
  if (origins.overrides.contains("gpt_config.model_type") && root["gpt_config"])
    for (const char* size : kModelSizes)
      if (!origins.overrides.contains(std::string("gpt_config.") + size)) root["gpt_config"].remove(size);

  for (const auto& section : root) {
    const std::string section_name = section.first.as<std::string>();
    if (section_name == kHydraSection) continue;
    SG_CHECK(!known_keys(keys, section_name).empty(), "config ", path, ": unknown section '", section_name,
             "' (known: data_config, gpt_config, trainer_config, optimizer_config)");
    SG_CHECK(section.second.IsMap() || section.second.IsNull(), "config ", path, ": section ", section_name,
             " must be a mapping of key: value");
    for (const auto& entry : section.second) {
      const std::string name = entry.first.as<std::string>();
      const Key* k = find_key(keys, section_name, name);
      SG_CHECK(k != nullptr, "config ", path, ": unknown key ", section_name, ".", name, " (known keys in ",
               section_name, ": ", known_keys(keys, section_name), ")");
      const std::string full_name = section_name + "." + name;
      try {
        SG_CHECK(entry.second.IsScalar(), "");
        k->read(entry.second);
      } catch (const std::exception&) {
        SG_FAIL(origins.of(full_name), ": ", full_name, " must be ", k->kind, ", got '", YAML::Dump(entry.second), "'");
      }
    }
  }
  const TrainerConfig& t = config.trainer;
  check_at_least<int64_t>(origins, "trainer_config.max_epochs", t.max_epochs, 1);
  check_at_least<int64_t>(origins, "trainer_config.batch_size", t.batch_size, 1);
  check_at_least<int64_t>(origins, "trainer_config.save_every", t.save_every, 1);
  check_at_least<int64_t>(origins, "trainer_config.save_every_steps", t.save_every_steps, 0);
  check_at_least<int64_t>(origins, "trainer_config.keep", t.keep, 0);
  check_at_least<int>(origins, "trainer_config.gradient_accumulation_steps", t.gradient_accumulation_steps, 1);
  check_at_least<int64_t>(origins, "trainer_config.data_loader_workers", t.data_loader_workers, 0);
  check_at_least<int64_t>(origins, "trainer_config.sample_tokens", t.sample_tokens, 0);
  SG_CHECK(t.data_loader_workers <= data::kMaxLoaderWorkers, origins.of("trainer_config.data_loader_workers"),
           ": trainer_config.data_loader_workers must be at most ", data::kMaxLoaderWorkers, " (threads), got ",
           t.data_loader_workers);
  SG_CHECK(t.grad_norm_clip > 0, origins.of("trainer_config.grad_norm_clip"),
           ": trainer_config.grad_norm_clip must be > 0, got ", t.grad_norm_clip);
  SG_CHECK(t.amp_dtype.empty() || t.amp_dtype == "f16" || t.amp_dtype == "bf16", origins.of("trainer_config.amp_dtype"),
           ": trainer_config.amp_dtype must be f16 or bf16, got '", t.amp_dtype, "'");
  SG_CHECK(!t.amp_debug || (t.use_amp && t.amp_dtype == "f16"), origins.of("trainer_config.amp_debug"),
           ": trainer_config.amp_debug reports on the f16 loss scaler: it needs use_amp true and amp_dtype f16");
  SG_CHECK(config.data.train_split > 0 && config.data.train_split <= 1, origins.of("data_config.train_split"),
           ": data_config.train_split must lie in (0, 1], got ", config.data.train_split);
  return config;
}

}  // namespace

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // yaml-cpp throws its own exceptions for what it cannot parse or convert (a section name that
  // is a list, a bad alias, ...; the config fuzz target found them): they name the file here.
  try {
    return config_from(YAML::LoadFile(path), path, overrides);
  } catch (const YAML::Exception& error) {
    SG_FAIL("config ", path, ": ", error.what());
  }
}

}  // namespace sg::apps::gpt
