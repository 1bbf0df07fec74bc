"""PyTorch's numbers for bench/conv.cpp: the same shapes, gradients and timing, one JSON line each.

Run with an interpreter that has torch (here /usr/bin/python3, Debian's python3-torch 1.13):
    /usr/bin/python3 bench/conv_torch.py [--threads 1,2]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

CONVS = [  # name, N, C, K, H, W, kernel, padding, input needs grad
    ("cnn_conv1", 64, 1, 32, 28, 28, 5, 2, False),
    ("cnn_conv2", 64, 32, 64, 14, 14, 5, 2, True),
    ("resnet_3x3", 8, 64, 64, 56, 56, 3, 1, True),
]
POOLS = [("cnn_pool1", 64, 32, 28, 28), ("cnn_pool2", 64, 64, 14, 14)]


def seconds_per_call(fn):
    """The best of 7 samples, each of enough calls to last >= 50 ms (as bench/conv.cpp)."""
    fn()
    start = time.perf_counter()
    fn()
    calls = max(1, int(0.05 / max(time.perf_counter() - start, 1e-9)))
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        torch.manual_seed(42)
        for name, n, c, k, h, w, kernel, padding, input_needs_grad in CONVS:
            x = torch.randn(n, c, h, w, requires_grad=input_needs_grad)
            weight = torch.randn(k, c, kernel, kernel, requires_grad=True)
            bias = torch.randn(k, requires_grad=True)
            grad = torch.randn(n, k, h, w)
            inputs = [t for t in (x, weight, bias) if t.requires_grad]
            flops = 2.0 * n * k * h * w * c * kernel * kernel
            forward = seconds_per_call(lambda: F.conv2d(x, weight, bias, padding=padding))
            both = seconds_per_call(
                lambda: torch.autograd.grad(F.conv2d(x, weight, bias, padding=padding), inputs, grad))
            for direction, seconds, work in [("forward", forward, flops),
                                             ("backward", both - forward, flops * (2 if input_needs_grad else 1))]:
                print(json.dumps({"bench": "conv", "impl": "torch", "shape": name, "direction": direction,
                                  "threads": threads, "ms": round(seconds * 1e3, 3),
                                  "gflops": round(work / seconds / 1e9, 1)}))
        for name, n, c, h, w in POOLS:
            x = torch.randn(n, c, h, w, requires_grad=True)
            grad = torch.randn(n, c, h // 2, w // 2)
            forward = seconds_per_call(lambda: F.max_pool2d(x, 2))
            both = seconds_per_call(lambda: torch.autograd.grad(F.max_pool2d(x, 2), [x], grad))
            for direction, seconds in [("forward", forward), ("backward", both - forward)]:
                print(json.dumps({"bench": "max_pool", "impl": "torch", "shape": name, "direction": direction,
                                  "threads": threads, "ms": round(seconds * 1e3, 3)}))


if __name__ == "__main__":
    main()
