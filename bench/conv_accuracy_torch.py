"""PyTorch's side of bench/cudnn_algorithms.cpp: how far PyTorch's own cuDNN convolution lands from the float64 sum,
at the same shape, in each direction, under each cuDNN setting PyTorch offers (deterministic, benchmark).

    python3 bench/conv_accuracy_torch.py [--shape 6,32,14,14,64,5,5,2] [--device cuda]

The error is measured as tests/cuda measures syncgrad's: max |got - want| / (|want| + 1), where want is the float64
result (of inputs first rounded to the dtype) rounded once to the dtype. Next to bench_cudnn_algorithms's table it
says whether an error seen in syncgrad's choice is cuDNN's at that shape (PyTorch gets it too) or the choice's.
"""
import argparse

import torch
import torch.nn.functional as F

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def error(got, want, dtype):
    want = want.to(dtype).double()
    return ((got.double().cpu() - want).abs() / (want.abs() + 1)).max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="6,32,14,14,64,5,5,2", help="N,C,H,W,K,R,S,PAD")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    n, c, h, w, k, r, s, pad = (int(value) for value in args.shape.split(","))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # strict f32, as syncgrad's default
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(n, c, h, w, dtype=torch.float64, generator=generator)
    weight = torch.randn(k, c, r, s, dtype=torch.float64, generator=generator)
    grad_out = torch.randn(n, k, h + 2 * pad - r + 1, w + 2 * pad - s + 1, dtype=torch.float64, generator=generator)
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}: input {list(x.shape)}, "
          f"weight {list(weight.shape)}, padding {pad}")
    for name, dtype in DTYPES.items():
        # The float64 answer from the inputs as the dtype holds them.
        x64, w64, g64 = (t.to(dtype).double() for t in (x, weight, grad_out))
        x64.requires_grad_()
        w64.requires_grad_()
        y64 = F.conv2d(x64, w64, padding=pad)
        y64.backward(g64)
        for deterministic in (False, True):
            for benchmark in (False, True):
                torch.backends.cudnn.deterministic = deterministic
                torch.backends.cudnn.benchmark = benchmark
                xd = x64.detach().to(args.device, dtype).requires_grad_()
                wd = w64.detach().to(args.device, dtype).requires_grad_()
                y = F.conv2d(xd, wd, padding=pad)
                y.backward(g64.to(args.device, dtype))
                print(f"{name:5s} deterministic={deterministic!s:5s} benchmark={benchmark!s:5s}: "
                      f"forward {error(y.detach(), y64.detach(), dtype):.3g}  "
                      f"input gradient {error(xd.grad, x64.grad, dtype):.3g}  "
                      f"weight gradient {error(wd.grad, w64.grad, dtype):.3g}")


if __name__ == "__main__":
    main()
