#!/usr/bin/env python3
"""Times a syncgrad benchmark and its PyTorch reference side by side, alternating A B A B.

    bench/compare_with_pytorch.py                       # the CNN step, 1 and 2 threads, 3 rounds
    bench/compare_with_pytorch.py --rounds 5 --threads 1 --steps 40

PyTorch 2.x comes from PyPI, installed on first use into a virtual environment under build/
(build/torch-venv, ~5 GB: a benchmark tool, never a build or test dependency). Debian's
python3-torch 1.13, when /usr/bin/python3 can import it, is timed as a second reference.

Each round runs every implementation once per thread count, one process at a time, with
OMP_NUM_THREADS / MKL_NUM_THREADS set to the same count for all; a round whose process used
clearly more or less CPU than threads x wall time (another process competing) is reported as void.
Prints every round, then per thread count the median of the per-round figures with their range,
and PyTorch's time over syncgrad's (above 1: syncgrad is faster).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "build", "torch-venv")


def venv_python():
    python = os.path.join(VENV, "bin", "python3")
    if not os.path.exists(python):
        print(f"installing PyTorch 2.x from PyPI into {VENV} (once; a few minutes, ~5 GB)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "torch"], check=True)
    return python


def debian_torch():
    try:
        found = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    except FileNotFoundError:
        found = False
    return "/usr/bin/python3" if found else None


def run(command, threads):
    """Runs one benchmark process; returns (ms_per_step, cpu seconds / wall seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for line in reversed(out.splitlines()):
        if line.startswith("{") and '"train_step"' in line:
            return json.loads(line)["ms_per_step"], cpu / wall
    raise RuntimeError(f"no train_step JSON line in the output of {' '.join(command)}:\n{out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn", choices=["cnn", "gpt-mini"],
                        help="gpt-mini: batch 32, block 128 (bench/reference/gpt_torch.py); try --steps 10")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="syncgrad's build directory")
    args = parser.parse_args()

    gpt = args.model.startswith("gpt")
    reference = os.path.join(ROOT, "bench", "reference", "gpt_torch.py" if gpt else f"{args.model}_torch.py")
    shape = ["--batch", "32", "--block", "128"] if gpt else []  # both sides' defaults for the CNN
    implementations = {"syncgrad": lambda t: [os.path.join(args.build, "bench", "bench_models"), "--model", args.model,
                                              "--threads", str(t), "--steps", str(args.steps)] + shape}
    python = venv_python()
    model_flag = ["--model", args.model] if gpt else []
    implementations["pytorch-2"] = lambda t: [python, reference, "--threads", str(t), "--steps", str(args.steps)] + model_flag + shape
    if (debian := debian_torch()) is not None:
        implementations["pytorch-1.13"] = lambda t: [debian, reference, "--threads", str(t), "--steps", str(args.steps)] + model_flag + shape

    thread_counts = [int(t) for t in args.threads.split(",")]
    results = {(name, t): [] for name in implementations for t in thread_counts}
    print(f"CPU: {cpu_model()}; load average at start: {os.getloadavg()[0]:.2f}")
    for round_index in range(args.rounds):
        for t in thread_counts:
            for name, command in implementations.items():
                ms, cpu_per_wall = run(command(t), t)
                # Start-up (imports, allocation) is single-threaded, so allow for it below threads.
                void = not (0.5 * t <= cpu_per_wall <= 1.15 * t)
                print(f"round {round_index + 1} threads {t} {name:13s} {ms:8.2f} ms/step  "
                      f"cpu/wall {cpu_per_wall:.2f}{'  VOID (competing load)' if void else ''}", flush=True)
                if not void:
                    results[(name, t)].append(ms)
    print()
    for t in thread_counts:
        ours = results[("syncgrad", t)]
        for name in implementations:
            times = results[(name, t)]
            if not times:
                print(f"threads {t} {name:13s} no valid round")
                continue
            line = f"threads {t} {name:13s} median {statistics.median(times):8.2f} ms/step (range {min(times):.2f}-{max(times):.2f}, {len(times)} rounds)"
            if name != "syncgrad" and ours:
                line += f"  {name} / syncgrad = {statistics.median(times) / statistics.median(ours):.2f}x"
            print(line)
            print(json.dumps({"bench": "compare", "model": args.model, "impl": name, "threads": t,
                              "median_ms_per_step": round(statistics.median(times), 3)}))


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
