"""PyTorch reference for bench_models --model cnn: the same CNN, batch 64, f32, Adam.

Run with Debian's interpreter (it sees python3-torch): /usr/bin/python3 bench/reference/cnn_torch.py --threads 1
Prints ms/step of forward + backward + Adam step, median of --steps timed steps after warm-up,
and the same JSON line format as bench_models so the two can be compared by a script.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


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
    model = cnn()
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
    print(f"pytorch {torch.__version__} cnn batch {args.batch} threads {args.threads}: {ms:.2f} ms/step")
    print(json.dumps({"bench": "train_step", "impl": "pytorch", "model": "cnn", "batch": args.batch,
                      "threads": args.threads, "ms_per_step": round(ms, 3)}))


if __name__ == "__main__":
    main()
