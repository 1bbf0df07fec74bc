"""PyTorch reference for bench_models --model gpt-mini: minGPT as PyTorch's minGPT-ddp example builds it
(distributed/minGPT-ddp/mingpt/model.py), one training step of forward + backward + clip_grad_norm_(1.0) +
AdamW (the recipe's create_optimizer groups), f32, dropout 0.1, on random tokens.

    build/torch-venv/bin/python3 bench/reference/gpt_torch.py --threads 1 --batch 32 --block 128

One change from the recipe, the same one syncgrad makes (docs/gpt.md, "The attention mask"): the recipe
passes a float 0/1 tril as attn_mask, which PyTorch *adds* to the scores (so the model sees the future);
here the mask is bool with is_causal=True and need_weights=False, so attention runs through
F.scaled_dot_product_attention's causal kernel. Everything else (names, shapes, init, optimizer groups)
is the recipe's, so tests/reference/make_gpt_constants.py imports this model too.

Prints ms/step (median of --steps timed steps after warm-up; --device and --amp as training_step.py says) and the
JSON line bench_models prints.
"""
import argparse
import inspect
import json
import math
import resource

import torch
import torch.nn as nn
from torch.nn import functional as F

import training_step

# PyTorch 1.13 (Debian's) has no is_causal; there the bool mask alone gives the same result.
CAUSAL = {"is_causal": True} if "is_causal" in inspect.signature(nn.MultiheadAttention.forward).parameters else {}

PRESETS = {
    "openai-gpt": (12, 12, 768), "gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280), "gpt2-xl": (48, 25, 1600), "gopher-44m": (8, 16, 512),
    "gpt-mini": (6, 6, 192), "gpt-micro": (4, 4, 128), "gpt-nano": (3, 3, 48),
}


class MultiheadAttentionLayer(nn.Module):
    def __init__(self, n_embd, n_head, block_size, attn_pdrop, resid_pdrop):
        super().__init__()
        self.resid_drop = nn.Dropout(resid_pdrop)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
        self.attn = nn.MultiheadAttention(embed_dim=n_embd, num_heads=n_head, dropout=attn_pdrop, batch_first=True)

    def forward(self, x):
        t = x.size(1)
        causal = self.mask[0, 0, :t, :t] == 0  # bool, True = not allowed
        y = self.attn(x, x, x, attn_mask=causal, need_weights=False, **CAUSAL)[0]
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, attn_pdrop, resid_pdrop):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.attn = MultiheadAttentionLayer(n_embd, n_head, block_size, attn_pdrop, resid_pdrop)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(resid_pdrop))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class EmbeddingStem(nn.Module):
    def __init__(self, vocab_size, n_embd, block_size, embd_pdrop):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.drop = nn.Dropout(embd_pdrop)

    def forward(self, idx):
        return self.drop(self.tok_emb(idx) + self.pos_emb[:, :idx.size(1), :])


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab_size, block_size, pdrop=0.1):
        super().__init__()
        self.block_size = block_size
        self.emb_stem = EmbeddingStem(vocab_size, n_embd, block_size, pdrop)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head, block_size, pdrop, pdrop) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, idx, targets=None):
        logits = self.head(self.ln_f(self.blocks(self.emb_stem(idx))))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def create_optimizer(model, learning_rate=3e-4, weight_decay=0.1):
    """The recipe's groups: Linear weights and in_proj_weight decay; biases, LayerNorm / Embedding weights
    and pos_emb do not."""
    decay, no_decay = set(), set()
    for mn, m in model.named_modules():
        for pn, _ in m.named_parameters():
            fpn = f"{mn}.{pn}" if mn else pn
            if pn.endswith("bias"):
                no_decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, nn.Linear):
                decay.add(fpn)
            elif pn.endswith("in_proj_weight"):
                decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, (nn.LayerNorm, nn.Embedding)):
                no_decay.add(fpn)
            elif pn.endswith("pos_emb"):
                no_decay.add(fpn)
    params = dict(model.named_parameters())
    assert not (decay & no_decay) and params.keys() == decay | no_decay
    groups = [{"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
              {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt-mini", choices=sorted(PRESETS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=96)
    training_step.add_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n_layer, n_head, n_embd = PRESETS[args.model]
    model = GPT(n_layer, n_head, n_embd, args.vocab, args.block).to(args.device)
    optimizer = create_optimizer(model)
    idx = torch.randint(0, args.vocab, (args.batch, args.block)).to(args.device)
    targets = torch.randint(0, args.vocab, (args.batch, args.block)).to(args.device)
    result = training_step.train(model, optimizer, lambda: model(idx, targets)[1], args, warmup=args.warmup,
                                 steps=args.steps, clip_grad_norm=1.0)
    ms = result.ms_per_step
    tokens_per_s = 1000.0 * args.batch * args.block / ms
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pytorch {torch.__version__} {args.model} batch {args.batch} block {args.block} threads {args.threads} on "
          f"{args.device} (mixed precision {args.amp}): {ms:.2f} ms/step, {tokens_per_s:.0f} tokens/s, peak RSS "
          f"{peak_rss_mb:.0f} MB (import torch included)")
    print(json.dumps({"bench": "train_step", "impl": "pytorch", "model": args.model, "batch": args.batch,
                      "block": args.block, "threads": args.threads, **result.json_fields(args),
                      "tokens_per_s": round(tokens_per_s, 1), "peak_rss_mb": round(peak_rss_mb, 1)}))


if __name__ == "__main__":
    main()
