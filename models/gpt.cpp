// models::GPT: minGPT as PyTorch's minGPT-ddp example builds it (mingpt/model.py), layer by layer,
// plus the KV cache its generate() does not have.
#include "models/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_index.h"
#include "autograd/ops_linalg.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_random.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_sort.h"
#include "core/factory.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace sg::models {

// Note [The causal mask]
// The recipe passes attn_mask = tril(ones(T, T)) as a *float* tensor to nn.MultiheadAttention,
// and PyTorch adds a float mask to the scores: allowed positions get +1, future positions +0, so
// the future keeps its scores and still receives attention. That model is not causal: it sees the
// token it is asked to predict, and its training loss says nothing about generation.
// Here the mask is the bool one (true = not allowed) with is_causal = true, which MultiheadAttention
// turns into the fused causal kernel; the recipe's per-block `mask` buffers are never used, so they
// are not part of the state_dict (load_recipe_state_dict accepts and drops them). The PyTorch
// reference scripts (tests/reference, bench/reference) pass is_causal=True with a bool mask too.

// Note [The KV cache]
// Generating token t + 1 needs the keys and values of positions 0 .. t at every layer; without a
// cache each step recomputes all of them (a forward over the whole context), with it each step
// computes them for the new position only and attends over the stored ones. Positions are
// absolute (pos_emb), so when the context outgrows block_size and the recipe crops it to the last
// block_size tokens, every token moves to a new position and every stored key is stale: the cache
// then restarts from the cropped context, exactly as the recipe recomputes it. Greedy output is
// the same with and without the cache; the cache saves work until the context first fills.

namespace {

constexpr const char* kName = "GPT";

const std::vector<std::pair<std::string, GPTShape>>& presets() {
  // The recipe's table (names follow Hugging Face's).
  static const std::vector<std::pair<std::string, GPTShape>> table = {
      {"openai-gpt", {12, 12, 768}},  {"gpt2", {12, 12, 768}},     {"gpt2-medium", {24, 16, 1024}},
      {"gpt2-large", {36, 20, 1280}}, {"gpt2-xl", {48, 25, 1600}}, {"gopher-44m", {8, 16, 512}},
      {"gpt-mini", {6, 6, 192}},      {"gpt-micro", {4, 4, 128}},  {"gpt-nano", {3, 3, 48}},
  };
  return table;
}

// [T, T] bool, true above the diagonal: the positions a query may not attend to.
Tensor causal_mask(int64_t T, Device device) {
  const Tensor position = arange(static_cast<double>(T), {DType::i64, device});
  return gt(position.unsqueeze(0), position.unsqueeze(1));
}

}  // namespace

const std::vector<std::string>& gpt_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : presets()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

GPTShape gpt_preset(const std::string& model_type) {
  for (const auto& [name, shape] : presets())
    if (name == model_type) return shape;
  std::string choices;
  for (const std::string& name : gpt_preset_names()) choices += (choices.empty() ? "" : ", ") + name;
  SG_FAIL("GPTConfig: unknown model_type '", model_type, "' (choices: ", choices, ")");
}

ResolvedGPTConfig resolve_gpt_config(const GPTConfig& config) {
  const int given = (config.n_layer ? 1 : 0) + (config.n_head ? 1 : 0) + (config.n_embd ? 1 : 0);
  SG_CHECK(given == 0 || given == 3, "GPTConfig: give all of n_layer, n_head and n_embd, or none (model_type '",
           config.model_type, "' then picks them); got ", given, " of them");
  const GPTShape shape =
      given == 3 ? GPTShape{*config.n_layer, *config.n_head, *config.n_embd} : gpt_preset(config.model_type);
  SG_CHECK(shape.n_layer > 0 && shape.n_head > 0 && shape.n_embd > 0,
           "GPTConfig: n_layer, n_head and n_embd must be positive, got ", shape.n_layer, ", ", shape.n_head, ", ",
           shape.n_embd);
  SG_CHECK(shape.n_embd % shape.n_head == 0, "GPTConfig: n_embd ", shape.n_embd, " is not a multiple of n_head ",
           shape.n_head);
  SG_CHECK(config.vocab_size > 0 && config.block_size > 0,
           "GPTConfig: vocab_size and block_size must be positive, got ", config.vocab_size, " and ",
           config.block_size);
  for (const auto& [name, p] :
       {std::pair{"embd_pdrop", config.embd_pdrop}, std::pair{"resid_pdrop", config.resid_pdrop},
        std::pair{"attn_pdrop", config.attn_pdrop}})
    SG_CHECK(p >= 0 && p < 1, "GPTConfig: ", name, " must lie in [0, 1), got ", p);
  return {.model_type = config.model_type,
          .n_layer = shape.n_layer,
          .n_head = shape.n_head,
          .n_embd = shape.n_embd,
          .vocab_size = config.vocab_size,
          .block_size = config.block_size,
          .embd_pdrop = config.embd_pdrop,
          .resid_pdrop = config.resid_pdrop,
          .attn_pdrop = config.attn_pdrop};
}

optim::Metadata gpt_metadata(const ResolvedGPTConfig& config) {
  return {{"n_layer", std::to_string(config.n_layer)},
          {"n_head", std::to_string(config.n_head)},
          {"n_embd", std::to_string(config.n_embd)},
          {"vocab_size", std::to_string(config.vocab_size)},
          {"block_size", std::to_string(config.block_size)}};
}

GPTConfig gpt_config_from_snapshot(const optim::Metadata& metadata, const std::map<std::string, Tensor>& tensors,
                                   const std::string& file) {
  const auto size = [&](const char* name) {
    return optim::metadata_integer(metadata, name, file, 1, std::numeric_limits<int32_t>::max());
  };
  const GPTConfig config{.n_layer = size("n_layer"),
                         .n_head = size("n_head"),
                         .n_embd = size("n_embd"),
                         .vocab_size = size("vocab_size"),
                         .block_size = size("block_size")};
  // The number of blocks the weights hold: one more than the largest N of "model.blocks.N.".
  int64_t blocks = 0;
  const std::string prefix = "model.blocks.";
  for (const auto& [name, tensor] : tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    SG_CHECK(!index.empty() && index.size() <= 9 && index.find_first_not_of("0123456789") == std::string::npos, file,
             ": tensor '", name, "' is not a block's weight (model.blocks.N.*)");
    blocks = std::max<int64_t>(blocks, std::stoll(index) + 1);
  }
  SG_CHECK(blocks == *config.n_layer, file, ": the metadata says n_layer = ", *config.n_layer, " but the file holds ",
           blocks, " block(s) of weights");
  const auto shape_of = [&](const std::string& name) {
    const auto it = tensors.find(name);
    SG_CHECK(it != tensors.end(), file, ": no tensor '", name, "' (not a snapshot of train_gpt?)");
    return it->second.sizes();
  };
  const Shape tok_emb = shape_of("model.emb_stem.tok_emb.weight"), pos_emb = shape_of("model.emb_stem.pos_emb");
  SG_CHECK(tok_emb.size() == 2 && tok_emb[0] == config.vocab_size && tok_emb[1] == *config.n_embd, file,
           ": the metadata says vocab_size = ", config.vocab_size, " and n_embd = ", *config.n_embd,
           " but the token embedding has shape ", shape_str(tok_emb));
  SG_CHECK(pos_emb.size() == 3 && pos_emb[1] == config.block_size && pos_emb[2] == *config.n_embd, file,
           ": the metadata says block_size = ", config.block_size, " and n_embd = ", *config.n_embd,
           " but the position embedding has shape ", shape_str(pos_emb));
  return config;
}

int64_t gpt_block_parameter_count(const ResolvedGPTConfig& config) {
  const int64_t C = config.n_embd;
  return config.n_layer * (13 * C * C + 14 * C);
}

double gpt_training_flops_per_token(const ResolvedGPTConfig& config) {
  const auto C = static_cast<double>(config.n_embd), T = static_cast<double>(config.block_size);
  const double multiplied_parameters =
      static_cast<double>(gpt_block_parameter_count(config)) + 2 * C + static_cast<double>(config.vocab_size) * C;
  return 6 * multiplied_parameters + 12 * static_cast<double>(config.n_layer) * C * T;
}

Tensor gpt_loss(const Tensor& logits, const Tensor& targets) {
  SG_CHECK(
      logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) && logits.size(1) == targets.size(1),
      "gpt_loss: logits of shape ", shape_str(logits.sizes()), " do not match targets of shape ",
      shape_str(targets.sizes()), " (expected [B, T, V] and [B, T])");
  return nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                       {.ignore_index = -1});
}

// ---- the layers ----

CausalSelfAttention::CausalSelfAttention(const ResolvedGPTConfig& config, Generator* generator) {
  resid_drop = register_module("resid_drop", std::make_shared<nn::Dropout>(config.resid_pdrop, generator));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(config.n_embd, config.n_embd, true, generator));
  attn = register_module(
      "attn", std::make_shared<nn::MultiheadAttention>(
                  config.n_embd, config.n_head,
                  nn::MultiheadAttentionOptions{.dropout = config.attn_pdrop, .batch_first = true}, generator));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  // Note [The causal mask]: bool + is_causal, so the fused kernel runs causal and reads no mask.
  const Tensor y =
      attn->forward(x, x, x,
                    {.need_weights = false, .attn_mask = causal_mask(x.size(1), x.device()), .is_causal = true})
          .first;
  return (*resid_drop)((*c_proj)(y));
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache& cache, size_t layer) {
  const int64_t B = x.size(0), T = x.size(1), C = attn->embed_dim, H = attn->num_heads, D = attn->head_dim;
  const int64_t start = cache.length;
  SG_CHECK(start == 0 || T == 1, kName,
           ": the KV cache takes a whole prompt when empty, then one token at a time; got ", T, " tokens after ",
           start);
  const Tensor qkv = linear(x, attn->in_proj_weight, attn->in_proj_bias);  // [B, T, 3C]
  const auto heads = [&](int64_t part) {                                   // [B, H, T, D]
    return qkv.narrow(2, part * C, C).reshape({B, T, H, D}).permute({0, 2, 1, 3});
  };
  cache.keys[layer].narrow(2, start, T).copy_(heads(1));
  cache.values[layer].narrow(2, start, T).copy_(heads(2));
  const Tensor keys = cache.keys[layer].narrow(2, 0, start + T);
  const Tensor values = cache.values[layer].narrow(2, 0, start + T);
  // One new query attends to every stored key; a whole prompt attends causally among itself.
  const double dropout_p = is_training() ? attn->options.dropout : 0.0;
  const Tensor y = scaled_dot_product_attention(heads(0), keys, values,
                                                {.dropout_p = dropout_p, .is_causal = start == 0}, attn->generator);
  return (*resid_drop)((*c_proj)((*attn->out_proj)(y.permute({0, 2, 1, 3}).reshape({B, T, C}))));
}

Block::Block(const ResolvedGPTConfig& config, Generator* generator) {
  const int64_t C = config.n_embd;
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{C}));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{C}));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config, generator));
  mlp =
      register_module("mlp", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                 std::make_shared<nn::Linear>(C, 4 * C, true, generator), std::make_shared<nn::GELU>(),
                                 std::make_shared<nn::Linear>(4 * C, C, true, generator),
                                 std::make_shared<nn::Dropout>(config.resid_pdrop, generator)}));
}

Tensor Block::forward(const Tensor& x) {
  const Tensor h = x + (*attn)((*ln1)(x));
  return h + (*mlp)((*ln2)(h));
}

Tensor Block::forward_cached(const Tensor& x, KVCache& cache, size_t layer) {
  const Tensor h = x + attn->forward_cached((*ln1)(x), cache, layer);
  return h + (*mlp)((*ln2)(h));
}

EmbeddingStem::EmbeddingStem(const ResolvedGPTConfig& config, Generator* generator) : block_size(config.block_size) {
  tok_emb = register_module(
      "tok_emb", std::make_shared<nn::Embedding>(config.vocab_size, config.n_embd, nn::EmbeddingOptions{}, generator));
  pos_emb = register_parameter("pos_emb", zeros({1, config.block_size, config.n_embd}));
  drop = register_module("drop", std::make_shared<nn::Dropout>(config.embd_pdrop, generator));
}

Tensor EmbeddingStem::forward(const Tensor& idx, int64_t first_position) {
  SG_CHECK(idx.dim() == 2, kName, ": expected token ids [B, T], got shape ", shape_str(idx.sizes()));
  const int64_t T = idx.size(1);
  SG_CHECK(first_position + T <= block_size, kName, ": cannot forward a sequence of length ", first_position + T,
           ", block size is only ", block_size);
  return (*drop)((*tok_emb)(idx) + pos_emb.narrow(1, first_position, T));
}

// ---- the model ----

GPT::GPT(const GPTConfig& config_in, Generator* generator)
    : config(resolve_gpt_config(config_in)),
      generator_(generator) {
  emb_stem = register_module("emb_stem", std::make_shared<EmbeddingStem>(config, generator));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < config.n_layer; ++i)
    block_list.push_back(blocks->push_back(std::make_shared<Block>(config, generator)));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{config.n_embd}));
  head = register_module("head", std::make_shared<nn::Linear>(config.n_embd, config.vocab_size, false, generator));

  // The recipe's _init_weights (GPT-2's), then the scaled residual projections. out_proj is a
  // Linear in PyTorch too (NonDynamicallyQuantizableLinear); in_proj_weight is not, and keeps
  // MultiheadAttention's xavier_uniform.
  apply([generator](nn::Module& module) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&module)) {
      nn::init::normal_(linear->weight, 0.0, 0.02, generator);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::Embedding*>(&module)) {
      nn::init::normal_(embedding->weight, 0.0, 0.02, generator);
    } else if (auto* norm = dynamic_cast<nn::LayerNorm*>(&module)) {
      nn::init::ones_(norm->weight);
      nn::init::zeros_(norm->bias);
    }
  });
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (const auto& block : block_list) nn::init::normal_(block->attn->c_proj->weight, 0.0, residual_std, generator);
}

Tensor GPT::forward(const Tensor& idx) {
  Tensor x = (*emb_stem)(idx);
  if (activation_checkpointing) {
    for (const auto& block : block_list)
      x = autograd::checkpoint([block](const Tensor& input) { return (*block)(input); }, x, {.generator = generator_});
  } else {
    x = (*blocks)(x);
  }
  return (*head)((*ln_f)(x));
}

std::pair<Tensor, Tensor> GPT::forward(const Tensor& idx, const Tensor& targets) {
  Tensor logits = forward(idx);
  Tensor loss = targets.defined() ? gpt_loss(logits, targets) : Tensor();
  return {logits, loss};
}

int64_t GPT::count(const TensorList& params) {
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  return total;
}

KVCache GPT::empty_cache(int64_t batch) const {
  KVCache cache;
  const int64_t H = config.n_head, D = config.n_embd / H;
  const TensorOptions options{head->weight.dtype(), head->weight.device()};
  for (int64_t i = 0; i < config.n_layer; ++i) {
    cache.keys.push_back(empty({batch, H, config.block_size, D}, options));
    cache.values.push_back(empty({batch, H, config.block_size, D}, options));
  }
  return cache;
}

Tensor GPT::last_logits_cached(const Tensor& idx, KVCache& cache) {
  const int64_t T = idx.size(1);
  Tensor x = emb_stem->forward(idx, cache.length);
  for (size_t layer = 0; layer < block_list.size(); ++layer) x = block_list[layer]->forward_cached(x, cache, layer);
  cache.length += T;
  return (*head)((*ln_f)(x.narrow(1, T - 1, 1))).squeeze(1);  // [B, V]
}

Tensor GPT::generate(const Tensor& idx, const GenerateOptions& options) {
  SG_CHECK(idx.dim() == 2 && idx.size(1) > 0 && idx.dtype() == DType::i64, kName,
           ".generate: expected a non-empty i64 context [B, T], got ", idx.dtype(), " of shape ",
           shape_str(idx.sizes()));
  SG_CHECK(options.max_new_tokens >= 0, kName, ".generate: max_new_tokens must be >= 0, got ", options.max_new_tokens);
  SG_CHECK(options.temperature > 0, kName, ".generate: temperature must be > 0, got ", options.temperature);
  SG_CHECK(!options.top_k || *options.top_k >= 1, kName, ".generate: top_k must be at least 1, got ",
           options.top_k.value_or(0));
  // A k beyond the vocabulary keeps every token, as in Hugging Face's TopKLogitsWarper and nanoGPT's
  // min(top_k, logits.size(-1)): a 4-letter text sampled with top_k 10 is no error. Keeping all V
  // masks nothing, so only a smaller k filters.
  const int64_t top_k = std::min(options.top_k.value_or(config.vocab_size), config.vocab_size);
  NoGradGuard no_grad;
  const int64_t block_size = config.block_size;
  Tensor sequence = idx.to(head->weight.device());
  KVCache cache;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int64_t T = sequence.size(1);
    // The recipe's crop: at most the last block_size tokens, at positions 0 .. block_size - 1.
    const Tensor context = T <= block_size ? sequence : sequence.narrow(1, T - block_size, block_size);
    Tensor logits;  // [B, V] at the last position
    if (!options.use_cache) {
      logits = forward(context).select(1, context.size(1) - 1);
    } else if (cache.length > 0 && T <= block_size) {  // the newest token at the next position
      logits = last_logits_cached(sequence.narrow(1, T - 1, 1), cache);
    } else {  // the first step, or the window moved (Note [The KV cache])
      cache = empty_cache(sequence.size(0));
      logits = last_logits_cached(context, cache);
    }
    logits = logits / options.temperature;
    if (top_k < config.vocab_size) {
      const Tensor kth = topk(logits, top_k).first.narrow(1, top_k - 1, 1);
      logits = masked_fill(logits, lt(logits, kth), -std::numeric_limits<double>::infinity());
    }
    const Tensor probs = softmax(logits, -1);
    const Tensor next = options.do_sample ? multinomial(probs, 1, false, options.generator) : topk(probs, 1).second;
    sequence = cat({sequence, next}, 1);
  }
  return sequence;
}

void GPT::load_recipe_state_dict(nn::StateDict state) {
  static const std::regex mask_key(R"(blocks\.\d+\.attn\.mask)");
  const Tensor causal = tril(ones({config.block_size, config.block_size}));
  for (auto it = state.begin(); it != state.end();) {
    if (!std::regex_match(it->first, mask_key)) {
      ++it;
      continue;
    }
    const Tensor& mask = it->second;
    SG_CHECK(mask.sizes() == Shape({1, 1, config.block_size, config.block_size}) &&
                 sub(mask.to(DType::f32).to(Device::cpu()).reshape({config.block_size, config.block_size}), causal)
                         .abs()
                         .max()
                         .item() == 0,
             kName, ": ", it->first, " of shape ", shape_str(mask.sizes()),
             " is not the recipe's causal mask tril(ones(", config.block_size, ", ", config.block_size,
             ")).view(1, 1, ", config.block_size, ", ", config.block_size, ")");
    it = state.erase(it);
  }
  load_state_dict(state, /*strict=*/true);
}

// ---- the optimizer ----

WeightDecaySplit split_weight_decay(nn::Module& model) {
  // Every (module, direct parameter) pair votes, as the recipe's loop over named_modules does; a
  // tensor registered in two places gets two votes.
  std::map<const TensorImpl*, std::set<bool>> votes;  // true: decay
  for (const auto& [module_name, module] : model.named_modules()) {
    for (const auto& [name, param] : module->named_parameters(/*recurse=*/false)) {
      const bool is_linear = dynamic_cast<const nn::Linear*>(module.get()) != nullptr;
      const bool no_decay_module = dynamic_cast<const nn::LayerNorm*>(module.get()) != nullptr ||
                                   dynamic_cast<const nn::Embedding*>(module.get()) != nullptr;
      std::set<bool>& vote = votes[param.impl()];
      if (name.ends_with("bias")) vote.insert(false);
      else if (name.ends_with("weight") && is_linear) vote.insert(true);
      else if (name.ends_with("in_proj_weight")) vote.insert(true);
      else if (name.ends_with("weight") && no_decay_module) vote.insert(false);
      else if (name.ends_with("pos_emb")) vote.insert(false);
    }
  }
  WeightDecaySplit split;
  std::vector<std::string> in_both, in_neither;
  for (const auto& [name, param] : model.named_parameters()) {
    const std::set<bool>& vote = votes[param.impl()];
    if (vote.size() == 2) in_both.push_back(name);
    else if (vote.empty()) in_neither.push_back(name);
    else (*vote.begin() ? split.decay : split.no_decay).emplace_back(name, param);
  }
  const auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
  };
  SG_CHECK(in_both.empty(), "create_optimizer: parameters ", join(in_both),
           " made it into both the decay and the no_decay group");
  SG_CHECK(in_neither.empty(), "create_optimizer: parameters ", join(in_neither),
           " were not separated into either the decay or the no_decay group (a weight of a Linear, LayerNorm or "
           "Embedding, an in_proj_weight, a bias or pos_emb)");
  const auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(split.decay.begin(), split.decay.end(), by_name);
  std::sort(split.no_decay.begin(), split.no_decay.end(), by_name);
  return split;
}

std::unique_ptr<optim::AdamW> create_optimizer(nn::Module& model, const OptimizerConfig& config) {
  const WeightDecaySplit split = split_weight_decay(model);
  const auto tensors = [](const std::vector<std::pair<std::string, Tensor>>& named) {
    TensorList out;
    for (const auto& entry : named) out.push_back(entry.second);
    return out;
  };
  const optim::AdamWOptions decay{
      .lr = config.learning_rate, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = config.weight_decay};
  auto optimizer = std::make_unique<optim::AdamW>(tensors(split.decay), decay);
  optim::AdamWOptions no_decay = decay;
  no_decay.weight_decay = 0.0;
  optimizer->add_param_group(tensors(split.no_decay), no_decay);
  return optimizer;
}

}  // namespace sg::models
