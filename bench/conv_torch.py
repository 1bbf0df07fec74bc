"""PyTorch's numbers for bench/conv.cpp: the same shapes, kernels and timing, one JSON line each.

Each convolution kernel is timed on its own, as autograd calls it: forward is F.conv2d, grad_input
and grad_weight are aten.convolution_backward with only that output asked for (PyTorch's oneDNN
backward, like ours, computes just what is asked). A time is the median of 7 samples after a
warm-up, each sample enough calls to last >= 50 ms. --verbose first runs each kernel once with
oneDNN's verbose log on, which names the implementation it ran (e.g. brg_conv_fwd:avx2).

Run with an interpreter that has torch 2.x (a venv, never a build dependency):
    python3 -m venv build/torch-venv && build/torch-venv/bin/pip install torch
    build/torch-venv/bin/python bench/conv_torch.py --threads 1 [--only resnet] [--verbose]
"""
import argparse
import json
import os
import time

PARSER = argparse.ArgumentParser()
PARSER.add_argument("--threads", default="1,2")
PARSER.add_argument("--only", default="", help="run the shapes whose name contains this")
PARSER.add_argument("--verbose", action="store_true")
ARGS = PARSER.parse_args()
THREADS = [int(t) for t in ARGS.threads.split(",")]
# OpenMP reads these once, when torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", str(max(THREADS)))
os.environ.setdefault("MKL_NUM_THREADS", str(max(THREADS)))

import torch  # noqa: E402  (after the environment above)
import torch.nn.functional as F  # noqa: E402


def conv_shapes():
    """(name, N, C, K, H, W, kernel, stride, padding), as conv_shapes() in bench/conv.cpp."""
    shapes = [("cnn_conv1", 64, 1, 32, 28, 28, 5, 1, 2), ("cnn_conv2", 64, 32, 64, 14, 14, 5, 1, 2)]

    def add_resnet(prefix, image, n):
        shapes.append((f"{prefix}stem_b{n}", n, 3, 64, image, image, 7, 2, 3))
        for stage in range(4):
            channels, size = 64 << stage, (image // 4) >> stage
            shapes.append((f"{prefix}3x3_{size}_b{n}", n, channels, channels, size, size, 3, 1, 1))
            if stage > 0:
                shapes.append((f"{prefix}down_{size}_b{n}", n, channels // 2, channels, 2 * size, 2 * size, 1, 2, 0))

    for n in (4, 16):
        add_resnet("resnet_", 224, n)
    add_resnet("resnet64_", 64, 16)
    return shapes


POOLS = [("cnn_pool1", 64, 32, 28, 28), ("cnn_pool2", 64, 64, 14, 14)]


def seconds_per_call(fn):
    """The median of 7 samples, each of enough calls to last >= 50 ms (as bench/conv.cpp)."""
    fn()
    start = time.perf_counter()
    fn()
    calls = max(1, int(0.05 / max(time.perf_counter() - start, 1e-9)))
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return sorted(samples)[len(samples) // 2]


def report(bench, shape, direction, threads, seconds, flops):
    entry = {"bench": bench, "impl": "torch", "shape": shape, "direction": direction, "threads": threads,
             "ms": round(seconds * 1e3, 3)}
    if flops:
        entry["gflops"] = round(flops / seconds / 1e9, 1)
    print(json.dumps(entry), flush=True)


def time_conv(name, n, c, k, h, w, kernel, stride, padding, threads):
    x = torch.randn(n, c, h, w)
    weight = torch.randn(k, c, kernel, kernel)
    bias = torch.randn(k)
    out = F.conv2d(x, weight, bias, stride=stride, padding=padding)
    grad = torch.randn(out.shape)
    flops = 2.0 * n * k * out.shape[2] * out.shape[3] * c * kernel * kernel

    def backward(mask):
        return torch.ops.aten.convolution_backward(grad, x, weight, None, [stride] * 2, [padding] * 2, [1, 1], False,
                                                   [0, 0], 1, mask)

    kernels = [("forward", lambda: F.conv2d(x, weight, bias, stride=stride, padding=padding)),
               ("grad_input", lambda: backward([True, False, False])),
               ("grad_weight", lambda: backward([False, True, False]))]
    if ARGS.verbose:
        print(f"# {name}: {torch._C._select_conv_backend(x, weight, bias, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], 1, None)}", flush=True)
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            for _, fn in kernels:
                fn()
    for direction, fn in kernels:
        report("conv", name, direction, threads, seconds_per_call(fn), flops)


def main():
    print(f"# torch {torch.__version__}, {torch.backends.mkldnn.is_available() and 'oneDNN available'}", flush=True)
    for threads in THREADS:
        torch.set_num_threads(threads)
        torch.manual_seed(42)
        with torch.no_grad():
            for shape in conv_shapes():
                if ARGS.only in shape[0]:
                    time_conv(*shape, threads)
        for name, n, c, h, w in POOLS:
            if ARGS.only not in name:
                continue
            x = torch.randn(n, c, h, w, requires_grad=True)
            grad = torch.randn(n, c, h // 2, w // 2)
            forward = seconds_per_call(lambda: F.max_pool2d(x, 2))
            both = seconds_per_call(lambda: torch.autograd.grad(F.max_pool2d(x, 2), [x], grad))
            report("max_pool", name, "forward", threads, forward, 0)
            report("max_pool", name, "backward", threads, both - forward, 0)


if __name__ == "__main__":
    main()
