"""PyTorch's numbers for bench/attention.cpp: causal attention forward + backward in f32 through
F.scaled_dot_product_attention (PyTorch's fused CPU flash attention) and through the same ops
composed (matmul, masked_fill, softmax, matmul), on the same (B, H, T, D) shapes; one JSON line
per measurement, ms the median of --repeats timed passes after one warm-up, as ours.

Run with an interpreter that has torch 2.x (a venv, never a build dependency):
    python3 -m venv build/torch-venv && build/torch-venv/bin/pip install torch
    build/torch-venv/bin/python3 bench/attention_torch.py --threads 1,2 [--repeats 5]
    build/torch-venv/bin/python3 bench/attention_torch.py --rss fused --T 4096   # peak RSS, one pass
"""
import argparse
import json
import os
import resource
import statistics
import time

PARSER = argparse.ArgumentParser()
PARSER.add_argument("--threads", default="1,2")
PARSER.add_argument("--repeats", type=int, default=5)
PARSER.add_argument("--impl", default="fused,composed")
PARSER.add_argument("--rss", default="", help="fused or composed: one pass at (1, 8, T, 64), then the peak RSS")
PARSER.add_argument("--T", type=int, default=1024)
ARGS = PARSER.parse_args()
THREADS = [int(t) for t in ARGS.threads.split(",")]
# OpenMP reads these once, when torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", str(max(THREADS)))
os.environ.setdefault("MKL_NUM_THREADS", str(max(THREADS)))

import torch  # noqa: E402  (after the environment above)
import torch.nn.functional as F  # noqa: E402


def make_inputs(B, H, T, D):
    generator = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(B, H, T, D, generator=generator) for _ in range(4))
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return [q.requires_grad_(), k.requires_grad_(), v.requires_grad_()], grad_out, future


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def composed(q, k, v, future):
    scores = (q @ k.transpose(-2, -1)) * (1.0 / q.size(-1) ** 0.5)
    return scores.masked_fill(future, float("-inf")).softmax(-1) @ v


def forward_backward_ms(inputs, grad_out, future, fused):
    q, k, v = inputs
    start = time.perf_counter()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True) if fused else composed(q, k, v, future)
    out.backward(grad_out)
    ms = (time.perf_counter() - start) * 1000
    for leaf in inputs:
        leaf.grad = None
    return ms


if ARGS.rss:
    torch.set_num_threads(THREADS[0])
    inputs, grad_out, future = make_inputs(1, 8, ARGS.T, 64)
    before = peak_rss_mb()  # torch imported, inputs made
    ms = forward_backward_ms(inputs, grad_out, future, ARGS.rss == "fused")
    print(json.dumps({"bench": "attention_rss", "impl": f"torch_{ARGS.rss}", "B": 1, "H": 8, "T": ARGS.T, "D": 64,
                      "causal": True, "ms": round(ms, 1), "rss_before_mb": round(before, 1),
                      "peak_rss_mb": round(peak_rss_mb(), 1)}))
else:
    for B, H, T, D in [(32, 6, 128, 32), (8, 6, 256, 64), (4, 12, 1024, 64)]:
        inputs, grad_out, future = make_inputs(B, H, T, D)
        for threads in THREADS:
            torch.set_num_threads(threads)
            for fused in (True, False):
                impl = "fused" if fused else "composed"
                if impl not in ARGS.impl:
                    continue
                forward_backward_ms(inputs, grad_out, future, fused)  # warm-up
                times = [forward_backward_ms(inputs, grad_out, future, fused) for _ in range(ARGS.repeats)]
                print(json.dumps({"bench": "attention", "impl": f"torch_{impl}", "B": B, "H": H, "T": T, "D": D,
                                  "causal": True, "threads": threads, "ms": round(statistics.median(times), 2)}),
                      flush=True)
