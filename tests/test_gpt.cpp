// models::GPT against the recipe's PyTorch minGPT (tests/reference/make_gpt_constants.py wrote the
// reference files): presets, names, logits, causality, the KV cache, the optimizer groups.
#include <algorithm>
#include <filesystem>

#include "dist_harness.h"
#include "helpers.h"
#include "models/gpt.h"
#include "reference/gpt_constants.h"

using namespace sg;
using models::GPT;
using models::GPTConfig;

namespace {

const std::string kReference = std::string(SG_SOURCE_DIR) + "/tests/reference/";

GPTConfig nano(int64_t vocab_size, int64_t block_size) {
  return {.model_type = "gpt-nano", .vocab_size = vocab_size, .block_size = block_size};
}

// The tiny model of make_gpt_constants.py, with PyTorch's weights, in eval mode.
std::shared_ptr<GPT> tiny_recipe_model() {
  auto model =
      std::make_shared<GPT>(GPTConfig{.n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 11, .block_size = 8});
  model->load_recipe_state_dict(load_safetensors(kReference + "gpt_tiny.safetensors").tensors);
  model->eval();
  return model;
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

}  // namespace

TEST_CASE("every preset's parameter count is the recipe's printed count, and gpt-nano/micro/mini count it so") {
  for (const auto& [name, count] : test::gpt_reference::kBlockParameters) {
    INFO(name);
    CHECK(models::gpt_block_parameter_count(models::resolve_gpt_config({.model_type = name})) == count);
  }
  CHECK(models::gpt_preset_names().size() == test::gpt_reference::kBlockParameters.size());
  Generator generator(1);
  for (const char* name : {"gpt-nano", "gpt-micro", "gpt-mini"}) {
    const GPT model({.model_type = name, .vocab_size = 65, .block_size = 128}, &generator);
    CHECK(model.num_block_parameters() ==
          models::gpt_block_parameter_count(models::resolve_gpt_config({.model_type = name})));
  }
}

TEST_CASE("gpt-nano's state_dict keys are the recipe's, less its per-block causal mask buffers") {
  std::vector<std::string> recipe;
  for (const std::string& key : test::gpt_reference::kNanoStateDictKeys)
    if (key.find(".attn.mask") == std::string::npos) recipe.push_back(key);
  CHECK(recipe.size() + 3 == test::gpt_reference::kNanoStateDictKeys.size());
  std::vector<std::string> ours;
  for (const auto& entry : GPT(nano(65, 128)).state_dict()) ours.push_back(entry.first);
  CHECK(sorted(ours) == sorted(recipe));
}

TEST_CASE("GPT-2 initialisation: N(0, 0.02) weights, scaled c_proj, zero pos_emb and biases, unit LayerNorms") {
  Generator generator(7);
  const GPT model({.model_type = "gpt-micro", .vocab_size = 65, .block_size = 128}, &generator);
  const auto std_of = [](const Tensor& t) {  // the mean is 0 by construction
    const Tensor x = t.to(DType::f64);
    return std::sqrt((x * x).mean().item());
  };
  // Each tensor holds >= 16384 draws: the sample std is within 2% of the true one (many sigmas).
  CHECK(std_of(model.emb_stem->tok_emb->weight) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(std_of(model.block_list[0]->mlp->named_parameters()[0].second) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(std_of(model.block_list[0]->attn->c_proj->weight) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.02));
  CHECK(std_of(model.block_list[0]->attn->attn->out_proj->weight) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(model.emb_stem->pos_emb.abs().max().item() == 0);
  CHECK(model.block_list[1]->attn->c_proj->bias.abs().max().item() == 0);
  CHECK(model.ln_f->weight.min().item() == 1);
  CHECK(!model.head->bias.defined());
}

TEST_CASE("logits and loss of the recipe's PyTorch weights equal what PyTorch computed") {
  const auto model = tiny_recipe_model();
  const SafetensorsFile expected = load_safetensors(kReference + "gpt_tiny_expected.safetensors");
  const auto [logits, loss] = model->forward(expected.tensors.at("idx"), expected.tensors.at("targets"));
  // f32 here against f64 in PyTorch over 2 layers of width 16: rounding stays below 1e-5.
  CHECK(test::max_abs_diff(logits.to(DType::f64), expected.tensors.at("logits")) < 1e-5);
  CHECK(loss.item() == doctest::Approx(expected.tensors.at("loss").item()).epsilon(1e-5));
}

TEST_CASE("greedy generation from the recipe's weights equals PyTorch's, with and without the cache, past block_size") {
  const auto model = tiny_recipe_model();
  const SafetensorsFile expected = load_safetensors(kReference + "gpt_tiny_expected.safetensors");
  const Tensor prompt = expected.tensors.at("idx").narrow(1, 0, 3);
  for (const bool use_cache : {false, true}) {
    INFO("use_cache ", use_cache);
    const Tensor generated = model->generate(prompt, {.max_new_tokens = 10, .use_cache = use_cache});
    CHECK(test::values(generated) == test::values(expected.tensors.at("generated")));
  }
}

TEST_CASE("the model is causal: changing token t + 1 never changes the logits at positions 0 .. t") {
  Generator generator(3);
  GPT model(nano(11, 12), &generator);
  model.eval();
  const Tensor idx = randint(0, 11, {2, 12}, {DType::i64}, &generator);
  const Tensor logits = model(idx);
  for (const int64_t t : {0, 4, 10}) {
    Tensor changed = idx.contiguous().clone();
    int64_t* tokens = changed.data_ptr<int64_t>();
    for (int64_t b = 0; b < 2; ++b) tokens[b * 12 + t + 1] = (tokens[b * 12 + t + 1] + 1) % 11;
    const Tensor other = model(changed);
    INFO("t = ", t);
    // Row r of every op depends on rows <= r only, computed the same way: equal to the bit.
    CHECK(test::max_abs_diff(logits.narrow(1, 0, t + 1), other.narrow(1, 0, t + 1)) == 0);
    CHECK(test::max_abs_diff(logits.narrow(1, t + 1, 1), other.narrow(1, t + 1, 1)) > 1e-4);
  }
}

TEST_CASE("generation with the KV cache gives the same greedy tokens as without it, also once the context is cropped") {
  Generator generator(5);
  GPT model(nano(11, 8), &generator);
  model.eval();
  const Tensor prompt = randint(0, 11, {3, 3}, {DType::i64}, &generator);
  const Tensor without = model.generate(prompt, {.max_new_tokens = 20, .use_cache = false});
  const Tensor with = model.generate(prompt, {.max_new_tokens = 20, .use_cache = true});
  CHECK(with.sizes() == Shape({3, 23}));
  CHECK(test::values(with) == test::values(without));
}

TEST_CASE("sampled generation with the cache draws the same tokens as without it from the same generator") {
  Generator init(8);
  GPT model(nano(11, 16), &init);
  model.eval();
  const Tensor prompt = randint(0, 11, {2, 4}, {DType::i64}, &init);
  std::vector<std::vector<double>> runs;
  for (const bool use_cache : {false, true}) {
    Generator sampler(99);
    runs.push_back(test::values(model.generate(prompt, {.max_new_tokens = 10,
                                                        .temperature = 0.8,
                                                        .do_sample = true,
                                                        .top_k = 5,
                                                        .use_cache = use_cache,
                                                        .generator = &sampler})));
  }
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("a top_k beyond the vocabulary keeps every token: it samples as no top_k does") {
  Generator init(8);
  GPT model(nano(4, 16), &init);  // a 4-letter vocabulary, as a DNA text's
  model.eval();
  const Tensor prompt = randint(0, 4, {2, 3}, {DType::i64}, &init);
  std::vector<std::vector<double>> runs;
  for (const std::optional<int64_t> top_k :
       {std::optional<int64_t>(10), std::optional<int64_t>(4), std::optional<int64_t>()}) {
    Generator sampler(99);
    runs.push_back(test::values(
        model.generate(prompt, {.max_new_tokens = 12, .do_sample = true, .top_k = top_k, .generator = &sampler})));
  }
  CHECK(runs[0] == runs[2]);
  CHECK(runs[1] == runs[2]);
}

TEST_CASE("generate refuses a bad context, temperature or top_k, naming the value") {
  GPT model(nano(11, 8));
  const Tensor prompt = zeros({1, 2}, {DType::i64});
  CHECK_THROWS_WITH_AS(model.generate(prompt, {.temperature = 0}), doctest::Contains("temperature must be > 0, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(model.generate(prompt, {.top_k = 0}), doctest::Contains("top_k must be at least 1, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(model.generate(zeros({1, 2}), {}), doctest::Contains("expected a non-empty i64 context"), Error);
  CHECK_THROWS_WITH_AS(model(zeros({1, 9}, {DType::i64})),
                       doctest::Contains("cannot forward a sequence of length 9, block size is only 8"), Error);
}

TEST_CASE("GPTConfig takes a preset or all three sizes, and names what is wrong") {
  CHECK(models::resolve_gpt_config({.model_type = "gpt-mini"}).n_embd == 192);
  CHECK(models::resolve_gpt_config({.n_layer = 8, .n_head = 8, .n_embd = 512}).n_layer == 8);  // overrides gpt2
  CHECK_THROWS_WITH_AS(models::resolve_gpt_config({.model_type = "gpt-huge"}),
                       doctest::Contains("unknown model_type 'gpt-huge' (choices: openai-gpt, gpt2, "), Error);
  CHECK_THROWS_WITH_AS(models::resolve_gpt_config({.n_layer = 2}),
                       doctest::Contains("give all of n_layer, n_head and n_embd, or none"), Error);
  CHECK_THROWS_WITH_AS(models::resolve_gpt_config({.n_layer = 2, .n_head = 5, .n_embd = 48}),
                       doctest::Contains("n_embd 48 is not a multiple of n_head 5"), Error);
  CHECK_THROWS_WITH_AS(models::resolve_gpt_config({.model_type = "gpt-nano", .attn_pdrop = 1.0}),
                       doctest::Contains("attn_pdrop must lie in [0, 1), got 1"), Error);
}

TEST_CASE("a snapshot's metadata rebuilds its model only where the file's weights agree with it") {
  models::GPT model({.n_layer = 2, .n_head = 3, .n_embd = 48, .vocab_size = 11, .block_size = 16});
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, tensor] : model.state_dict()) tensors["model." + name] = tensor;
  optim::Metadata metadata = models::gpt_metadata(model.config);
  const models::GPTConfig config = models::gpt_config_from_snapshot(metadata, tensors, "snap.safetensors");
  CHECK(*config.n_layer == 2);
  CHECK(*config.n_head == 3);
  CHECK(*config.n_embd == 48);
  CHECK(config.vocab_size == 11);
  CHECK(config.block_size == 16);

  // A claim that would build layers until memory runs out is refused before anything is built.
  metadata["n_layer"] = "2147483647";
  CHECK_THROWS_WITH_AS(
      models::gpt_config_from_snapshot(metadata, tensors, "snap.safetensors"),
      doctest::Contains("snap.safetensors: the metadata says n_layer = 2147483647 but the file holds 2 "
                        "block(s)"),
      Error);
  metadata = models::gpt_metadata(model.config);
  metadata["n_embd"] = "96";
  CHECK_THROWS_WITH_AS(models::gpt_config_from_snapshot(metadata, tensors, "snap.safetensors"),
                       doctest::Contains("n_embd = 96 but the token embedding has shape [11, 48]"), Error);
  metadata = models::gpt_metadata(model.config);
  metadata["block_size"] = "32";
  CHECK_THROWS_WITH_AS(models::gpt_config_from_snapshot(metadata, tensors, "snap.safetensors"),
                       doctest::Contains("block_size = 32 and n_embd = 48 but the position embedding has shape"),
                       Error);
  metadata = models::gpt_metadata(model.config);
  metadata.erase("n_head");
  CHECK_THROWS_WITH_AS(models::gpt_config_from_snapshot(metadata, tensors, "snap.safetensors"),
                       doctest::Contains("n_head"), Error);
}

TEST_CASE("load_recipe_state_dict drops the recipe's causal masks and refuses any other mask") {
  nn::StateDict state = load_safetensors(kReference + "gpt_tiny.safetensors").tensors;
  REQUIRE(state.count("blocks.1.attn.mask") == 1);
  GPT model({.n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 11, .block_size = 8});
  state["blocks.1.attn.mask"] = ones({1, 1, 8, 8});  // the future visible
  CHECK_THROWS_WITH_AS(model.load_recipe_state_dict(state),
                       doctest::Contains("blocks.1.attn.mask of shape [1, 1, 8, 8] is not the recipe's causal mask"),
                       Error);
  state.erase("blocks.1.attn.mask");
  state.erase("blocks.0.attn.mask");
  model.load_recipe_state_dict(state);  // a state_dict of ours has no masks
  CHECK(test::max_abs_diff(model.head->weight, state.at("head.weight")) == 0);
}

TEST_CASE(
    "create_optimizer decays Linear weights and in_proj_weight only, as the recipe's groups, with betas 0.9 / 0.95") {
  auto model = std::make_shared<GPT>(nano(11, 8));
  const models::WeightDecaySplit split = models::split_weight_decay(*model);
  std::vector<std::string> decay;
  for (int block = 0; block < 3; ++block)
    for (const char* name : {"attn.attn.in_proj_weight", "attn.attn.out_proj.weight", "attn.c_proj.weight",
                             "mlp.0.weight", "mlp.2.weight"})
      decay.push_back("blocks." + std::to_string(block) + "." + name);
  decay.push_back("head.weight");
  CHECK(names_of(split.decay) == sorted(decay));
  CHECK(split.decay.size() + split.no_decay.size() == model->named_parameters().size());
  for (const std::string& name : names_of(split.no_decay)) {
    INFO(name);
    CHECK((name.ends_with("bias") || name.ends_with("pos_emb") || name.ends_with("tok_emb.weight") ||
           name.find(".ln") != std::string::npos || name.starts_with("ln_f")));
  }
  const auto optimizer = models::create_optimizer(*model, {.learning_rate = 3e-4, .weight_decay = 0.1});
  REQUIRE(optimizer->num_param_groups() == 2);
  CHECK(optimizer->hyperparameters(0).at("weight_decay") == 0.1);
  CHECK(optimizer->hyperparameters(1).at("weight_decay") == 0.0);
  CHECK(optimizer->hyperparameters(0).at("beta2") == 0.95);
  CHECK(optimizer->lr(1) == 3e-4);
}

namespace {

// A parameter of a name the recipe's rules do not cover, and a LayerNorm weight also registered
// as an in_proj_weight elsewhere (one vote each way).
class Unsplittable : public nn::Module {
public:
  explicit Unsplittable(bool shared) {
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{4}));
    if (shared) register_parameter("in_proj_weight", norm->weight);
    else register_parameter("scale", ones({4}));
  }
  std::shared_ptr<nn::LayerNorm> norm;
};

}  // namespace

TEST_CASE("create_optimizer takes a GPT built on the stack") {
  GPT model(nano(11, 8));
  const auto optimizer = models::create_optimizer(model, {.learning_rate = 3e-4, .weight_decay = 0.1});
  CHECK(optimizer->num_param_groups() == 2);
}

TEST_CASE("create_optimizer names a parameter that falls in neither group or in both") {
  auto neither = std::make_shared<Unsplittable>(false);
  CHECK_THROWS_WITH_AS(models::create_optimizer(*neither, {}),
                       doctest::Contains("parameters scale were not separated into either"), Error);
  auto both = std::make_shared<Unsplittable>(true);
  CHECK_THROWS_WITH_AS(models::create_optimizer(*both, {}),
                       doctest::Contains("made it into both the decay and the no_decay group"), Error);
}

TEST_CASE("a snapshot of model, optimizer and RNG continues training bit-identically") {
  test::TempDir dir;
  const std::string path = dir.path() + "/snapshot.safetensors";
  Generator data(11);
  const Tensor idx = randint(0, 11, {4, 8}, {DType::i64}, &data);
  const Tensor targets = randint(0, 11, {4, 8}, {DType::i64}, &data);
  // Dropout on (0.1 everywhere): the continuation depends on the default generator's state too.
  const auto train = [&](GPT& model, optim::Optimizer& optimizer, int steps) {
    double loss_value = 0;
    for (int step = 0; step < steps; ++step) {
      optimizer.zero_grad();
      Tensor loss = model.forward(idx, targets).second;
      loss.backward();
      optimizer.step();
      loss_value = loss.item();
    }
    return loss_value;
  };
  dist::Accelerator accelerator;
  manual_seed(21);
  auto first = std::make_shared<GPT>(nano(11, 8));
  auto first_optimizer = models::create_optimizer(*first, {});
  accelerator.prepare(*first_optimizer);
  train(*first, *first_optimizer, 2);
  accelerator.save_state(path, *first, {{"epoch", "1"}});
  const double continued = train(*first, *first_optimizer, 2);

  manual_seed(0);  // a different init and RNG position, all replaced by the snapshot
  auto second = std::make_shared<GPT>(nano(11, 8));
  auto second_optimizer = models::create_optimizer(*second, {});
  dist::Accelerator resumed;
  resumed.prepare(*second_optimizer);
  resumed.load_state(path, *second);
  CHECK(train(*second, *second_optimizer, 2) == continued);
  CHECK(test::max_abs_diff(first->head->weight, second->head->weight) == 0);
}
