"""PyTorch reference for bench_models --model cnn: the same CNN, batch 64, f32 (or --amp), Adam.

    build/torch-venv/bin/python3 bench/reference/cnn_torch.py --threads 1
    python3 bench/reference/cnn_torch.py --device cuda --amp bf16
Prints ms/step of forward + backward + Adam step, median of --steps timed steps after warm-up (training_step.py),
and the same JSON line format as bench_models so the two can be compared by a script. Under torchrun it trains
through DDP (ddp_torch.py).
"""
import argparse
import json

import torch
import torch.nn as nn

import ddp_torch
import training_step


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
    training_step.add_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ddp_torch.wrap(cnn().to(args.device))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    x = torch.randn(args.batch, 1, 28, 28).to(args.device)
    y = torch.randint(0, 10, (args.batch,)).to(args.device)
    result = training_step.train(model, optimizer, lambda: nn.functional.cross_entropy(model(x), y), args,
                                 warmup=5, steps=args.steps)
    ms = result.ms_per_step
    processes = ddp_torch.world_size()
    images_per_s = 1000 * args.batch * processes / ms
    if not ddp_torch.is_main_process():
        return
    print(f"pytorch {torch.__version__} cnn batch {args.batch} x {processes} process(es) threads {args.threads} on "
          f"{args.device} (mixed precision {args.amp}): {ms:.2f} ms/step, {images_per_s:.1f} images/s")
    print(json.dumps({"bench": "train_step", "impl": "pytorch", "model": "cnn", "batch": args.batch,
                      "threads": args.threads, "processes": processes, **result.json_fields(args),
                      "images_per_s": round(images_per_s, 1)}))


if __name__ == "__main__":
    main()
