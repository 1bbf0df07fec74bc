"""PyTorch reference for bench_models --model cnn: the same CNN, batch 64, f32, Adam.

Run with Debian's interpreter (it sees python3-torch): /usr/bin/python3 bench/reference/cnn_torch.py --threads 1
Prints ms/step of forward + backward + Adam step, median of --steps timed steps after warm-up,
and the same JSON line format as bench_models so the two can be compared by a script. Under torchrun it trains
through DDP (ddp_torch.py).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn

import ddp_torch


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 64), nn.ReLU(), nn.Linear(64, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ddp_torch.wrap(cnn())
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    times = []
    for step in range(args.steps + 5):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step >= 5:
            times.append((time.perf_counter() - start) * 1000)
    ms = statistics.median(times)
    processes = ddp_torch.world_size()
    images_per_s = 1000 * args.batch * processes / ms
    if not ddp_torch.is_main_process():
        return
    print(f"pytorch {torch.__version__} cnn batch {args.batch} x {processes} process(es) threads {args.threads}: "
          f"{ms:.2f} ms/step, {images_per_s:.1f} images/s")
    print(json.dumps({"bench": "train_step", "impl": "pytorch", "model": "cnn", "batch": args.batch,
                      "threads": args.threads, "processes": processes, "ms_per_step": round(ms, 3),
                      "images_per_s": round(images_per_s, 1)}))


if __name__ == "__main__":
    main()
