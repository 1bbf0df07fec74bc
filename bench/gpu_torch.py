"""PyTorch's numbers for bench/gpu.cpp (bench_gpu): the same matmuls, convolutions and causal attention on the
same GPU, timed the same way (CUDA events; 3 warm-up calls, then the best of 5 samples of 20 calls), printed as
one line and one JSON object each under bench_gpu's names, so a script can pair them.

    python3 bench/gpu_torch.py [--sizes 1024,4096,8192] [--attention 8,12,1024,64]

f32 means strict f32 on both sides (TF32 off for cuBLAS and cuDNN, as syncgrad's default); tf32 turns it on for
the matmul. cuDNN keeps PyTorch's default (benchmark off: its heuristics pick the algorithm, as syncgrad's do).
Attention is F.scaled_dot_product_attention(is_causal=True) in bf16, forward + backward, which picks
FlashAttention on sm_80 and later; its FLOPs are counted as bench_gpu counts them.
"""
import argparse
import json

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def milliseconds_per_call(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / 20)
    return best


def report(what, dtype, flops, ms):
    gflops = flops / (ms * 1e6)
    print(f"{what:<34} {dtype:<9} {ms:9.3f} ms {gflops:10.1f} GFLOP/s")
    print(json.dumps({"bench": "gpu", "impl": "pytorch", "op": what, "dtype": dtype, "ms": round(ms, 4),
                      "gflops": round(gflops, 1)}))


def bench_matmul(n):
    for name, dtype in DTYPES.items():
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        report(f"matmul {n}^3", name, 2.0 * n * n * n, milliseconds_per_call(lambda: torch.mm(a, b)))
    torch.backends.cuda.matmul.allow_tf32 = False


def bench_conv(name, batch, in_channels, out_channels, size, kernel, padding):
    x = torch.randn(batch, in_channels, size, size, device="cuda")
    w = torch.randn(out_channels, in_channels, kernel, kernel, device="cuda")
    out_size = size + 2 * padding - kernel + 1
    flops = 2.0 * batch * out_channels * out_size * out_size * in_channels * kernel * kernel
    report(name, "f32", flops, milliseconds_per_call(lambda: F.conv2d(x, w, padding=padding)))


def bench_attention(batch, heads, length, head_size):
    q, k, v = (torch.randn(batch, heads, length, head_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad_out = torch.randn(batch, heads, length, head_size, device="cuda", dtype=torch.bfloat16)
    flops = 3.5 * 4.0 * batch * heads * length * length * head_size / 2

    def step():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad_out)

    report(f"attention causal fwd+bwd {batch}x{heads}x{length}x{head_size}", "bf16", flops,
           milliseconds_per_call(step))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1024,4096,8192")
    parser.add_argument("--attention", default="8,12,1024,64")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_torch.py: nothing to measure, no GPU")
        return
    print(f"pytorch {torch.__version__} on {torch.cuda.get_device_name()} (cuDNN {torch.backends.cudnn.version()})")
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        for n in (int(s) for s in args.sizes.split(",")):
            bench_matmul(n)
        bench_conv("conv2d CNN 1->32 k5 28x28 b64", 64, 1, 32, 28, 5, 2)
        bench_conv("conv2d CNN 32->64 k5 14x14 b64", 64, 32, 64, 14, 5, 2)
        bench_conv("conv2d ResNet 64->64 k3 56x56 b8", 8, 64, 64, 56, 3, 1)
    bench_attention(*(int(s) for s in args.attention.split(",")))


if __name__ == "__main__":
    main()
