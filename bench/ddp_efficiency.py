#!/usr/bin/env python3
"""Data-parallel efficiency on one machine: DDP against what two processes could do with no communication.

    bench/ddp_efficiency.py                                   # the CNN, 64 images per step split in two
    bench/ddp_efficiency.py --model resnet34 --per-process 16 --steps 12 --rounds 4

Two ranks on a two-core machine cannot reach 2x one process: they share the cores, the memory
bandwidth and the caches with each other and with their communication. The honest ceiling is
measured, not assumed: two independent one-thread `bench_models` processes started together,
each on half the global batch, with no communication at all. Each round runs, alternated:

  ceiling  two independent processes, --batch P each, at the same time
  ddp      `sgrun --standalone --nproc-per-node 2 bench_models --batch P` (DDP, shared-memory all-reduce)
  single   one process, --batch 2P, for the plain speed-up

and prints images per second of each. Efficiency = ddp / ceiling (the target is >= 0.95); the
speed-up = ddp / single. Everything runs with OMP_NUM_THREADS=1 and --threads 1. Medians over
the rounds, each round's ratio taken within the round (a noisy minute moves both sides).

The ceiling adds up two processes that never wait for each other. A synchronous step cannot: each
one ends when the slower rank's does. So the script also prints the lockstep ceiling: the same two
independent processes' step times paired by step index, each pair costing the slower of the two
(global batch / median of max(t1_i, t2_i)). Two vCPUs are sometimes not equally fast (one
process's median step 5-10% above the other's for a whole run): that, and the per-step jitter, is
lost to any synchronous data parallelism, with or without communication. ddp / lockstep is what is
left to the implementation; "pair" prints the two processes' median steps.
"""
import argparse
import json
import os
import statistics
import subprocess

from compare_with_pytorch import cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def json_line(output, command, bench):
    for line in reversed(output.splitlines()):
        if f'{{"bench":"{bench}"' in line:  # under sgrun the line starts with "[rank 0] "
            return json.loads(line[line.index("{"):])
    raise RuntimeError(f"no {bench} JSON line in the output of {' '.join(command)}:\n{output}")


def run_together(commands, env):
    """Starts every command at once and waits for all; returns their train_step JSON lines, each with
    the step_times line's "ms" added as "step_ms"."""
    processes = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in commands]
    lines = []
    for command, process in zip(commands, processes):
        output, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}:\n{output}")
        lines.append(dict(json_line(output, command, "train_step"),
                          step_ms=json_line(output, command, "step_times")["ms"]))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn", choices=["cnn", "resnet34"])
    parser.add_argument("--per-process", type=int, default=32, help="batch per process (the global batch is twice it)")
    parser.add_argument("--image-size", type=int, default=64, help="resnet34: the side of the images")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="syncgrad's build directory")
    args = parser.parse_args()

    bench = os.path.join(args.build, "bench", "bench_models")
    sgrun = os.path.join(args.build, "apps", "sgrun")

    def bench_command(batch):
        command = [bench, "--model", args.model, "--threads", "1", "--batch", str(batch), "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--step-times"]
        return command + (["--image-size", str(args.image_size)] if args.model == "resnet34" else [])

    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cpu = cpu_model()
    print(f"CPU: {cpu}; {os.cpu_count()} logical CPUs; load average at start: {os.getloadavg()[0]:.2f}")
    figures = {"ceiling": [], "lockstep": [], "ddp": [], "single": [], "efficiency": [], "lockstep_efficiency": [],
               "speedup": []}
    for round_index in range(args.rounds):
        # images_per_s counts every process of a DDP run (batch x processes / step time).
        pair = run_together([bench_command(args.per_process)] * 2, env)
        ceiling = sum(line["images_per_s"] for line in pair)
        slower_of_each_step = [max(a, b) for a, b in zip(pair[0]["step_ms"], pair[1]["step_ms"])]
        lockstep = 1000.0 * 2 * args.per_process / statistics.median(slower_of_each_step)
        ddp_command = [sgrun, "--standalone", "--nproc-per-node", "2"] + bench_command(args.per_process)
        ddp = run_together([ddp_command], env)[0]["images_per_s"]
        single = run_together([bench_command(2 * args.per_process)], env)[0]["images_per_s"]
        for name, value in (("ceiling", ceiling), ("lockstep", lockstep), ("ddp", ddp), ("single", single),
                            ("efficiency", ddp / ceiling), ("lockstep_efficiency", ddp / lockstep),
                            ("speedup", ddp / single)):
            figures[name].append(value)
        print(f"round {round_index + 1}: ceiling {ceiling:8.1f} images/s (pair {pair[0]['ms_per_step']:.2f}, "
              f"{pair[1]['ms_per_step']:.2f} ms)  lockstep {lockstep:8.1f}  ddp {ddp:8.1f}  single {single:8.1f}  "
              f"efficiency {ddp / ceiling:.3f} (lockstep {ddp / lockstep:.3f})  speed-up {ddp / single:.2f}x  "
              f"ceiling/single {ceiling / single:.2f}x", flush=True)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"median: efficiency {medians['efficiency']:.3f} (range {min(figures['efficiency']):.3f}-"
          f"{max(figures['efficiency']):.3f}), against the lockstep ceiling {medians['lockstep_efficiency']:.3f} "
          f"(range {min(figures['lockstep_efficiency']):.3f}-{max(figures['lockstep_efficiency']):.3f}), "
          f"lockstep/ceiling {statistics.median(l / c for l, c in zip(figures['lockstep'], figures['ceiling'])):.3f}, "
          f"DDP speed-up {medians['speedup']:.2f}x, "
          f"ceiling {statistics.median(c / s for c, s in zip(figures['ceiling'], figures['single'])):.2f}x one process")
    print(json.dumps({"bench": "ddp_efficiency", "model": args.model, "per_process": args.per_process,
                      "cpu": cpu, "rounds": args.rounds,
                      **{f"median_{name}": round(value, 4) for name, value in medians.items()}}))


if __name__ == "__main__":
    main()
