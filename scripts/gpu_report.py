"""The table of scripts/gpu-check.sh: reads its steps (NAME.log, NAME.status, the order file) and prints
gpu-report.md in Markdown: each check, whether it passed, syncgrad's figure, PyTorch's figure on the same GPU, and
their ratio against the target. Exit status 1 when a check failed (a speed below its target is reported, not
failed: it says where the next change is, not that something is broken).

    python3 scripts/gpu_report.py STEPS_DIR MACHINE_TXT > gpu-report.md
"""
import json
import math
import re
import sys
from pathlib import Path

CNN_ACCURACY_TARGET = 87.0  # one epoch, in every precision
F16_SKIPS_ALLOWED = 5  # the loss scaler may skip the first few steps while its scale comes down


class Steps:
    def __init__(self, folder):
        self.folder = Path(folder)
        self.order = (self.folder / "order").read_text().split()

    def status(self, name):
        path = self.folder / f"{name}.status"
        return path.read_text().strip() if path.exists() else "not run"

    def log(self, name):
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def ran(self, name):
        return self.status(name) == "exit 0"

    def json_lines(self, name):
        rows = []
        for line in self.log(name).splitlines():
            line = line.strip()
            if line.startswith("{") and line.endswith("}"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return rows


def last_words(steps, name):
    """What a step that gave no result said last: usually its error."""
    lines = [line.strip() for line in steps.log(name).splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def outcome(steps, name, ok=True):
    """pass, or why not: the step's own status first."""
    if not steps.ran(name):
        return f"FAIL ({steps.status(name)})"
    return "pass" if ok else "FAIL"


def last_line(text, pattern):
    found = re.findall(pattern, text)
    return found[-1] if found else None


def ratio_cell(value, target):
    if value is None:
        return "", ""
    mark = "" if target is None or value >= target else " (below target)"
    return f"{value:.2f}x{mark}", "" if target is None else f">= {target}x"


def suite_row(steps, name):
    summary = last_line(steps.log(name), r"test cases:[^\n]*")
    return [name, outcome(steps, name), summary or last_words(steps, name), "", "", ""]


def cnn_row(steps, name, target):
    """A train_cnn run: its last epoch's test accuracy, at least `target` (when given)."""
    log = steps.log(name)
    accuracy = last_line(log, r"test accuracy ([0-9.]+)%")
    seconds = last_line(log, r"\(training ([0-9.]+) s")
    ok = accuracy is not None and (target is None or float(accuracy) >= target)
    figure = f"test accuracy {accuracy}% (training {seconds} s)" if accuracy else last_words(steps, name)
    return [name, outcome(steps, name, ok), figure, "", "", f">= {target}%" if target else ""]


def training_step(steps, name):
    rows = [r for r in steps.json_lines(name) if r.get("bench") == "train_step"]
    return rows[-1] if rows else None


def loss_text(loss):
    return "not finite" if loss is None or not math.isfinite(loss) else f"{loss:.4g}"


def model_row(steps, name):
    ours = training_step(steps, name)
    theirs = training_step(steps, f"{name}-pytorch")
    if ours is None:
        return [name, outcome(steps, name, False), last_words(steps, name), "", "", ""]
    first, last = ours["loss_first"], ours["loss_last"]  # null when not finite
    finite_and_falling = first is not None and last is not None and last < first
    skips = ours.get("skipped_steps", 0)
    ok = finite_and_falling and (ours.get("amp") != "f16" or skips <= F16_SKIPS_ALLOWED)
    figure = f"{ours['ms_per_step']:.2f} ms/step; loss {loss_text(first)} -> {loss_text(last)}"
    if ours.get("amp") == "f16":
        figure += f", {skips} skipped"
    peer, ratio = "", None
    if theirs is not None:
        peer = (f"{theirs['ms_per_step']:.2f} ms/step; loss {loss_text(theirs['loss_first'])} -> "
                f"{loss_text(theirs['loss_last'])}")
        ratio = theirs["ms_per_step"] / ours["ms_per_step"]
    elif f"{name}-pytorch" in steps.order:
        peer = f"no result ({steps.status(name + '-pytorch')})"
    ratio_text, target = ratio_cell(ratio, 1.0 if theirs is not None else None)
    return [name, outcome(steps, name, ok), figure, peer, ratio_text, target]


def kernel_rows(steps, name):
    theirs = {(r["op"], r["dtype"]): r for r in steps.json_lines(f"{name}-pytorch") if r.get("bench") == "gpu"}
    rows = []
    for ours in (r for r in steps.json_lines(name) if r.get("bench") == "gpu"):
        peer = theirs.get((ours["op"], ours["dtype"]))
        target = 0.95 if ours["op"].startswith("matmul") else 0.5 if ours["op"].startswith("attention") else None
        ratio = ours["gflops"] / peer["gflops"] if peer else None
        ratio_text, target_text = ratio_cell(ratio, target)
        rows.append([f"{ours['op']} {ours['dtype']}", "pass", f"{ours['gflops'] / 1000:.1f} TFLOP/s ({ours['ms']:.3f} ms)",
                     f"{peer['gflops'] / 1000:.1f} TFLOP/s" if peer else "", ratio_text, target_text])
    if not rows:
        rows.append([name, outcome(steps, name, False), last_words(steps, name), "", "", ""])
    return rows


def plain_row(steps, name):
    return [name, outcome(steps, name), last_words(steps, name), "", "", ""]


def rows_for(steps, name):
    if name.endswith("-pytorch"):
        return []  # beside its own step's row
    if name == "cuda-suite":
        return [suite_row(steps, name)]
    if name == "nccl-ddp":  # part of an epoch: it must train, not reach the full epoch's accuracy
        return [cnn_row(steps, name, None)]
    if name.startswith("cnn-") and name != "cnn-step":
        return [cnn_row(steps, name, CNN_ACCURACY_TARGET)]
    if name.startswith(("resnet", "gpt", "cnn-step")):
        return [model_row(steps, name)]
    if name == "kernels":
        return kernel_rows(steps, name)
    return [plain_row(steps, name)]


def main():
    steps = Steps(sys.argv[1])
    machine = Path(sys.argv[2]).read_text().strip().splitlines()
    rows = [row for name in steps.order for row in rows_for(steps, name)]
    print(f"# {machine[0]}\n")
    for line in machine[1:]:
        print(f"    {line}")
    print("\n| check | result | syncgrad | PyTorch | ratio | target |\n|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    failed = [row[0] for row in rows if not row[1].startswith("pass")]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    print("\nSpeed ratios are PyTorch's time over syncgrad's (training steps) or syncgrad's rate over PyTorch's "
          "(kernels): above 1 is faster than PyTorch.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
