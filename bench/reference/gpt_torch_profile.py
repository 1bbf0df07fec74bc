"""Where PyTorch's own gpt-mini training step goes: torch.profiler's self CPU time per op over a few steps of
bench/reference/gpt_torch.py's model, split into the matrix products (GEMM) and everything else, the way
`bench_models --profile` splits syncgrad's step, so that a non-GEMM share of syncgrad's step can be read beside
PyTorch's.

    build/torch-venv/bin/python3 bench/reference/gpt_torch_profile.py --threads 1 --batch 32 --block 128

GEMM is the self time of aten::mm and addmm (a Linear's forward and the two products of its backward land there;
aten::linear and aten::matmul only dispatch to them). The attention's products are counted apart: in training,
with dropout, PyTorch 2.15's CPU MultiheadAttention does not take its fused flash kernel but the composed "math"
path, whose q k^T and P v products (and their backward's) are aten::bmm, while syncgrad's fused kernel runs them
inside the kernel and its profile counts them outside GEMM. Both non-GEMM shares are printed: with the attention's
bmm counted as GEMM, and counted with the attention as syncgrad's are. Prints the self time per step of each kind
and of the largest ops, and one JSON line.
"""
import argparse
import json

import torch
from torch.profiler import ProfilerActivity, profile

from gpt_torch import GPT, PRESETS, create_optimizer

GEMM_OPS = {"aten::mm", "aten::addmm"}
ATTENTION_PRODUCTS = {"aten::bmm", "aten::baddbmm"}  # only the attention multiplies batches of matrices here


def kind_of(name):
    """The kind an op's self time counts as: GEMM, the attention's products, or one of the non-GEMM kinds."""
    if name in GEMM_OPS:
        return "GEMM"
    if name in ATTENTION_PRODUCTS:
        return "attention products (bmm)"
    if "scaled_dot_product" in name or "flash_attention" in name:
        return "fused attention"
    if "layer_norm" in name:
        return "LayerNorm"
    if "dropout" in name or "bernoulli" in name:
        return "dropout"
    if "_foreach" in name or "adam" in name.lower() or "clip" in name or "norm" in name:
        return "optimizer and clipping"
    return "other"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt-mini", choices=sorted(PRESETS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps, after --warmup unprofiled ones")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=96)
    parser.add_argument("--top", type=int, default=15, help="how many of the largest ops to list")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n_layer, n_head, n_embd = PRESETS[args.model]
    model = GPT(n_layer, n_head, n_embd, args.vocab, args.block)
    optimizer = create_optimizer(model)
    idx = torch.randint(0, args.vocab, (args.batch, args.block))
    targets = torch.randint(0, args.vocab, (args.batch, args.block))

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(idx, targets)[1].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for _ in range(args.warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()

    ops = [(e.key, e.self_cpu_time_total / 1000 / args.steps) for e in prof.key_averages()]  # ms per step
    total = sum(ms for _, ms in ops)
    kinds = {}
    for name, ms in ops:
        kinds[kind_of(name)] = kinds.get(kind_of(name), 0.0) + ms
    print(f"pytorch {torch.__version__} {args.model} batch {args.batch} block {args.block} threads {args.threads}: "
          f"{total:.1f} ms of self time per profiled step")
    for kind, ms in sorted(kinds.items(), key=lambda item: -item[1]):
        print(f"  {kind:<24} {ms:8.1f} ms  {100 * ms / total:5.1f}%")
    gemm, products = kinds.get("GEMM", 0.0), kinds.get("attention products (bmm)", 0.0)
    print(f"  non-GEMM share, the attention's bmm counted as GEMM: {100 * (1 - (gemm + products) / total):.1f}%")
    print(f"  non-GEMM share, the attention's bmm counted with the attention (as syncgrad's): "
          f"{100 * (1 - gemm / total):.1f}%")
    print("largest ops (self time per step):")
    for name, ms in sorted(ops, key=lambda item: -item[1])[:args.top]:
        print(f"  {name:<56} {ms:8.1f} ms  {100 * ms / total:5.1f}%  {kind_of(name)}")
    print(json.dumps({"bench": "train_step_profile", "impl": "pytorch", "model": args.model, "batch": args.batch,
                      "block": args.block, "threads": args.threads, "ms_self_per_step": round(total, 2),
                      "share": {kind: round(ms / total, 4) for kind, ms in kinds.items()}}))


if __name__ == "__main__":
    main()
