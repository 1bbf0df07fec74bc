#!/usr/bin/env python3
"""f32 GEMM: syncgrad's matmul against OpenBLAS called directly and PyTorch 2.x's torch.mm, alternated.

    bench/gemm_vs_torch.py                         # n = 1024 and 2048, 1 and 2 threads, 3 rounds
    bench/gemm_vs_torch.py --sizes 512,1024 --rounds 5

Each round runs build/bench/bench_gemm (syncgrad, OpenBLAS, Eigen and BLIS in one process,
interleaved) and then one PyTorch process timing torch.mm on the same sizes and thread counts
(MKL or whatever its wheel brings), so noise from other processes lands on both within a round.
Prints per round, then the medians and syncgrad / max(OpenBLAS, torch.mm) — the figure that
says whether our GEMM is the fastest this CPU offers. PyTorch comes from the venv under build/
(bench/compare_with_pytorch.py installs it).
"""
import argparse
import json
import os
import statistics
import subprocess

from compare_with_pytorch import ROOT, cpu_model, venv_python

TORCH_TIMER = r"""
import json, sys, time, torch
sizes, threads = [int(s) for s in sys.argv[1].split(",")], [int(t) for t in sys.argv[2].split(",")]
for t in threads:
    torch.set_num_threads(t)
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        once = time.perf_counter(); torch.mm(a, b); once = time.perf_counter() - once
        calls = max(1, int(0.05 / max(once, 1e-9)))
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(calls):
                torch.mm(a, b)
            samples.append((time.perf_counter() - start) / calls)
        seconds = sorted(samples)[3]
        print(json.dumps({"impl": "torch.mm", "n": n, "threads": t, "gflops": 2.0 * n ** 3 / seconds / 1e9}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1024,2048")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="syncgrad's build directory")
    args = parser.parse_args()

    python = venv_python()
    bench = [os.path.join(args.build, "bench", "bench_gemm"), "--sizes", args.sizes, "--shapes", "",
             "--threads", args.threads]
    print(f"CPU: {cpu_model()}; load average at start: {os.getloadavg()[0]:.2f}")
    figures = {}  # (impl, n, threads) -> GFLOP/s per round
    for round_index in range(args.rounds):
        ours = subprocess.run(bench, capture_output=True, text=True, check=True).stdout
        lines = [json.loads(line) for line in ours.splitlines() if line.startswith('{"bench":"gemm"')]
        theirs = subprocess.run([python, "-c", TORCH_TIMER, args.sizes, args.threads], capture_output=True, text=True,
                                check=True).stdout
        lines += [json.loads(line) for line in theirs.splitlines()]
        for line in lines:
            figures.setdefault((line["impl"], line["n"], line["threads"]), []).append(line["gflops"])
        print(f"round {round_index + 1}: " + ", ".join(f"{line['impl']} n={line['n']} t={line['threads']} "
                                                       f"{line['gflops']:.0f}" for line in lines), flush=True)
    print()
    for t in (int(t) for t in args.threads.split(",")):
        for n in (int(n) for n in args.sizes.split(",")):
            medians = {impl: statistics.median(values) for (impl, size, threads), values in figures.items()
                       if size == n and threads == t}
            best_other = max(medians.get("openblas", 0), medians.get("torch.mm", 0))
            ratio = medians["syncgrad"] / best_other if best_other else float("nan")
            print(f"n {n:5d} threads {t}: " + "  ".join(f"{impl} {value:.1f}" for impl, value in sorted(medians.items()))
                  + f"  GFLOP/s; syncgrad / best of (OpenBLAS, torch.mm) = {ratio:.3f}")
            print(json.dumps({"bench": "gemm_vs_torch", "n": n, "threads": t, "cpu": cpu_model(),
                              **{f"{impl}_gflops": round(value, 2) for impl, value in medians.items()},
                              "ratio_to_best": round(ratio, 4)}))


if __name__ == "__main__":
    main()
