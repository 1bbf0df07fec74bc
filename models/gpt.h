#pragma once
// defines: models::GPT, GPTConfig, ResolvedGPTConfig, GenerateOptions, KVCache, gpt_preset,
//          resolve_gpt_config, gpt_metadata, gpt_config_from_snapshot, gpt_block_parameter_count,
//          gpt_training_flops_per_token,
//          gpt_loss, OptimizerConfig, create_optimizer, split_weight_decay —
//          the character-level GPT of PyTorch's minGPT-ddp example (mingpt/model.py), with its
//          state_dict names, its presets, its optimizer groups and its generate(), plus a KV cache.
//
// Shape letters: B batch, T time (sequence), C = n_embd channels, V vocab_size, H heads, D = C / H.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/multihead_attention.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"

namespace sg::models {

// The recipe's GPTConfig. The shape comes from n_layer, n_head and n_embd when all three are
// given, else from the preset named by model_type (gpt_preset), as the recipe's _set_model_config.
struct GPTConfig {
  std::string model_type = "gpt2";
  std::optional<int64_t> n_layer{}, n_head{}, n_embd{};
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;
  double embd_pdrop = 0.1;
  double resid_pdrop = 0.1;
  double attn_pdrop = 0.1;
};

struct GPTShape {
  int64_t n_layer, n_head, n_embd;
};

// openai-gpt, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gopher-44m, gpt-mini, gpt-micro, gpt-nano;
// anything else is an sg::Error listing them.
GPTShape gpt_preset(const std::string& model_type);
const std::vector<std::string>& gpt_preset_names();
// A GPTConfig with every size decided: what a built GPT keeps.
struct ResolvedGPTConfig {
  std::string model_type;
  int64_t n_layer, n_head, n_embd;
  int64_t vocab_size, block_size;
  double embd_pdrop, resid_pdrop, attn_pdrop;
};

// `config` with n_layer, n_head and n_embd taken from it or from its preset; checks every field
// (positive sizes, n_embd a multiple of n_head, dropouts in [0, 1)) and names the one that is wrong.
ResolvedGPTConfig resolve_gpt_config(const GPTConfig& config);

// What a snapshot must carry to rebuild the model: n_layer, n_head, n_embd, vocab_size and
// block_size as decimal strings (train_gpt adds the vocabulary; see gpt_config_from_snapshot).
optim::Metadata gpt_metadata(const ResolvedGPTConfig& config);
// The model `metadata` describes (gpt_metadata's keys), checked against the snapshot's `tensors`
// (its "model."-prefixed weights) before anything is built, so a damaged or hand-edited file is an
// sg::Error naming `file` and the field rather than a model built to its word: n_layer must be the
// number of blocks.N the file holds, and n_embd, vocab_size and block_size the token and position
// embeddings' shapes.
GPTConfig gpt_config_from_snapshot(const optim::Metadata& metadata, const std::map<std::string, Tensor>& tensors,
                                   const std::string& file);

// The parameters of the transformer blocks alone — what the recipe prints as "number of
// parameters: %.2fM" (it leaves out the embeddings, ln_f and head): per block 13 C^2 + 14 C
// (ln1, ln2: 2C each; in_proj 3C^2 + 3C; out_proj and c_proj C^2 + C each; the MLP 8C^2 + 5C).
int64_t gpt_block_parameter_count(const ResolvedGPTConfig& config);

// The model FLOPs (Note [Model FLOPs] in nn/flop_count.h) of one training step per token, as nanoGPT's
// estimate_mfu counts them: 6 N + 12 n_layer n_head D T, with T = block_size, D = C / H.
// - 6 N: every parameter that multiplies an activation does one multiply-add (2 FLOPs) per token in the
//   forward and two in the backward (the gradients of the input and of the weight). N is every parameter
//   except the token and position embeddings, which are looked up, not multiplied: the blocks
//   (gpt_block_parameter_count), ln_f (2 C) and head (V C, no bias). nanoGPT's N is the same set: it
//   drops the position embedding and keeps the token embedding, which it ties to the head. The
//   LayerNorms and biases (14 C per block) count as in nanoGPT, a rounding error beside 13 C^2.
// - 12 n_layer n_head D T: attention's two products per layer, q k^T and att v, each T x D multiply-adds
//   per head and token in the forward (over all T positions: nanoGPT ignores the causal mask too), x 3.
double gpt_training_flops_per_token(const ResolvedGPTConfig& config);

// cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1), the recipe's loss.
Tensor gpt_loss(const Tensor& logits, const Tensor& targets);

// Keys and values of every layer for the positions generated so far, kept between the steps of
// generate() so that each new token runs through the model alone (Note [The KV cache]).
struct KVCache {
  std::vector<Tensor> keys, values;  // per layer [B, H, block_size, D]; positions [0, length) hold data
  int64_t length = 0;
};

// The recipe's MultiheadAttentionLayer: torch.nn.MultiheadAttention (batch_first, dropout
// attn_pdrop) over the causal mask, then the c_proj Linear and the residual dropout.
class CausalSelfAttention : public nn::Module {
public:
  CausalSelfAttention(const ResolvedGPTConfig& config, Generator* generator);
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]
  // x [B, T_new, C] holds positions cache.length .. + T_new; writes their keys and values into
  // layer `layer` of the cache (the caller advances cache.length once all layers ran).
  Tensor forward_cached(const Tensor& x, KVCache& cache, size_t layer);
  std::string type_name() const override { return "MultiheadAttentionLayer"; }

  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::Linear> c_proj;
  std::shared_ptr<nn::Dropout> resid_drop;
};

// x + attn(ln1(x)), then x + mlp(ln2(x)); mlp = Linear(C, 4C), GELU, Linear(4C, C), Dropout.
class Block : public nn::Module {
public:
  Block(const ResolvedGPTConfig& config, Generator* generator);
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, KVCache& cache, size_t layer);
  std::string type_name() const override { return "Block"; }

  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<nn::Sequential> mlp;
};

// Token embedding plus a learned position embedding (zero at start), then dropout.
class EmbeddingStem : public nn::Module {
public:
  EmbeddingStem(const ResolvedGPTConfig& config, Generator* generator);
  Tensor forward(const Tensor& idx) override { return forward(idx, 0); }
  // idx [B, T] (i64) at positions first_position .. first_position + T, which must stay below block_size.
  Tensor forward(const Tensor& idx, int64_t first_position);
  std::string type_name() const override { return "EmbeddingStem"; }

  int64_t block_size;
  std::shared_ptr<nn::Embedding> tok_emb;
  Tensor pos_emb;  // [1, block_size, C]
  std::shared_ptr<nn::Dropout> drop;
};

struct GenerateOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;
  bool do_sample = false;          // sample from the distribution, else take the most likely token
  std::optional<int64_t> top_k{};  // keep only the k most likely tokens before sampling (all for k >= vocab_size)
  bool use_cache = true;           // Note [The KV cache]
  Generator* generator = nullptr;  // the sampling draws (the default generator when null)
};

// Input idx [B, T] (i64, T <= block_size) -> logits [B, T, V]. State_dict keys are the recipe's:
//   emb_stem.tok_emb.weight, emb_stem.pos_emb,
//   blocks.N.ln1.{weight,bias}, blocks.N.ln2.{weight,bias},
//   blocks.N.attn.attn.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias},
//   blocks.N.attn.c_proj.{weight,bias}, blocks.N.mlp.0.{weight,bias}, blocks.N.mlp.2.{weight,bias},
//   ln_f.{weight,bias}, head.weight
// (the recipe's per-block causal mask buffers are not state here: Note [The causal mask]).
// Initialised as GPT-2: Linear and Embedding weights N(0, 0.02), c_proj.weight N(0, 0.02 / sqrt(2 n_layer)),
// biases 0, LayerNorm 1 and 0, pos_emb 0; in_proj_weight keeps MultiheadAttention's xavier_uniform.
class GPT : public nn::Module {
public:
  // `generator` draws the initial weights and every dropout mask (the default generator when null).
  explicit GPT(const GPTConfig& config, Generator* generator = nullptr);

  Tensor forward(const Tensor& idx) override;  // the one-tensor forward DDP wraps
  // The recipe's forward(idx, targets) -> (logits, loss); loss = gpt_loss(logits, targets).
  std::pair<Tensor, Tensor> forward(const Tensor& idx, const Tensor& targets);
  std::string type_name() const override { return "GPT"; }

  // Extends idx [B, T] by max_new_tokens tokens as the recipe's generate(): each step feeds the
  // last block_size tokens, scales the last position's logits by 1 / temperature, keeps the top_k,
  // then samples or takes the most likely. Runs without autograd; the caller chooses eval().
  Tensor generate(const Tensor& idx, const GenerateOptions& options);

  // Loads weights saved by this class or by the recipe's PyTorch model (strict otherwise): the
  // recipe's blocks.N.attn.mask buffers are checked to be the causal mask and dropped.
  void load_recipe_state_dict(nn::StateDict state);

  // The recipe's count: parameters of the blocks only.
  int64_t num_block_parameters() const { return count(blocks->parameters()); }

  // Run each Block through autograd::checkpoint (Note [Activation checkpointing]): the blocks'
  // activations are recomputed during backward instead of kept, replaying the dropout masks.
  bool activation_checkpointing = false;

  ResolvedGPTConfig config;
  std::shared_ptr<EmbeddingStem> emb_stem;
  std::shared_ptr<nn::Sequential> blocks;
  std::vector<std::shared_ptr<Block>> block_list;  // the same blocks, typed
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;

private:
  Generator* generator_;  // the dropouts' (null: the default generator), replayed by checkpointing
  static int64_t count(const TensorList& params);
  // The logits of the last position after running idx [B, T_new] through the cache.
  Tensor last_logits_cached(const Tensor& idx, KVCache& cache);
  KVCache empty_cache(int64_t batch) const;
};

// The recipe's OptimizerConfig.
struct OptimizerConfig {
  double learning_rate = 3e-4;
  double weight_decay = 0.1;
};

// Parameter names split as the recipe's create_optimizer splits them: weights of Linear layers and
// in_proj_weight decay; biases, LayerNorm and Embedding weights and pos_emb do not. A parameter in
// neither set, or in both (a tensor shared by two modules that disagree), is an sg::Error naming it.
// Each list is sorted by name, as the recipe's.
struct WeightDecaySplit {
  std::vector<std::pair<std::string, Tensor>> decay, no_decay;
};
WeightDecaySplit split_weight_decay(nn::Module& model);

// AdamW(lr, betas 0.9 / 0.95) with two groups: split.decay at weight_decay, split.no_decay at 0.
std::unique_ptr<optim::AdamW> create_optimizer(nn::Module& model, const OptimizerConfig& config);

}  // namespace sg::models
