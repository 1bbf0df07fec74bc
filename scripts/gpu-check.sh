#!/usr/bin/env bash
# Proves the CUDA backend on a GPU machine in under nine minutes, from the bundle scripts/gpu-bundle.sh made.
#
#   scripts/gpu-check.sh [BUNDLE [OUTDIR]]     # defaults: gpu-bundle, gpu-check-out; run from the repository root
#
# Unpacks BUNDLE/syncgrad-gpu.tar.xz, finds the CUDA libraries of the machine (the toolkit's lib folders and the
# nvidia/*/lib folders of python3's site-packages, where PyTorch's CUDA wheels put cuBLAS, cuDNN and NCCL) and
# checks that every binary and library of the bundle loads from the bundle or from them. With a GPU it then runs,
# in this order, each step bounded by `timeout` and all of them by one time budget (a step that fails or runs out
# of time is reported and the next one runs):
#   the CUDA test suite (every GPU op against the CPU); the CNN for one epoch in f32, f16 (autocast + loss scaler)
#   and bf16; DDP over a one-process NCCL group under sgrun; ResNet34 (224², batch 32) and gpt-mini (batch 64,
#   block 128) training steps in f32 (strict and TF32, alike on both sides), bf16 and f16 beside PyTorch's same
#   step; GEMM, convolution and fused
#   attention beside torch.mm, conv2d and scaled_dot_product_attention.
# Without a GPU (a dry run, as CI does) it stops after the loading checks, and also checks that the bundle runs
# (the suite says it has no GPU and exits 77) and that the carry (bundle + working tree) fits in 60 MiB.
# Writes OUTDIR/gpu-report.md (one table: check, result, figure, PyTorch's figure, ratio) and OUTDIR/gpu-log.txt
# (every step's output), and prints the table last. Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-gpu-bundle}
out=${2:-gpu-check-out}
budget_seconds=${SG_GPU_CHECK_BUDGET:-520}  # the whole check, unpacking included: inside 9 minutes
carry_limit_mib=60

deadline=$((SECONDS + budget_seconds))
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/gpu-log.txt"
: >"$log"
work=$(mktemp -d /tmp/syncgrad-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
steps="$work/steps"  # one .log and one .status per step and their order, read by scripts/gpu_report.py
mkdir -p "$steps"
: >"$steps/order"
say() { echo "$*" | tee -a "$log"; }

[ -f "$bundle/syncgrad-gpu.tar.xz" ] || { echo "gpu-check: no $bundle/syncgrad-gpu.tar.xz: run scripts/gpu-bundle.sh first" >&2; exit 2; }
xz -dc "$bundle/syncgrad-gpu.tar.xz" | tar -C "$work" -xf - || { echo "gpu-check: cannot unpack $bundle/syncgrad-gpu.tar.xz" >&2; exit 2; }
root="$work/syncgrad-gpu"
bin="$root/bin"

# ---- the machine's CUDA libraries ----
cuda_dirs=()
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$dir" ] && cuda_dirs+=("$dir")
done
if command -v python3 >/dev/null; then
  while read -r site; do
    for dir in "$site"/nvidia/*/lib; do [ -d "$dir" ] && cuda_dirs+=("$dir"); done
  done < <(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
fi
library_path="$root/lib"
for dir in "${cuda_dirs[@]}"; do library_path+=":$dir"; done
export LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

find_library() {  # the first file named $1 in the CUDA folders
  for dir in "${cuda_dirs[@]}"; do [ -e "$dir/$1" ] && { readlink -f "$dir/$1"; return; }; done
  echo "not found"
}

has_gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then has_gpu=1; fi

{
  echo "syncgrad GPU check, $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
  head -n 2 "$root/MANIFEST"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; $(ldd --version | head -n1)"
  if [ $has_gpu = 1 ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | sed 's/^/GPU: /'
  else
    echo "GPU: none (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists no GPU' || echo 'is not installed')): a dry run"
  fi
  command -v nvcc >/dev/null && nvcc --version | grep release | sed 's/^/nvcc: /'
  for library in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    echo "$library: $(find_library "$library")"
  done
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>/dev/null \
    || echo "PyTorch: not importable here"
  echo "CUDA library folders: ${cuda_dirs[*]:-none}"
} 2>&1 | tee "$work/machine.txt" >>"$log"
cat "$work/machine.txt"

# step NAME SECONDS COMMAND...: runs COMMAND under the remaining budget (a program under `timeout`; a function
# of this script directly), its output to the log and the step's files.
step() {
  local name=$1 limit=$2
  shift 2
  echo "$name" >>"$steps/order"
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 15 ]; then
    echo "no time left" >"$steps/$name.status"
    say "== $name: not run, the time budget is spent"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "== $name (at most ${limit} s): $*"
  local started=$SECONDS status
  if declare -F "$1" >/dev/null; then
    "$@" >"$steps/$name.log" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" >"$steps/$name.log" 2>&1
  fi
  status=$?
  cat "$steps/$name.log" >>"$log"
  if [ $status = 124 ] || [ $status = 137 ]; then
    echo "timed out after ${limit} s" >"$steps/$name.status"
  else
    echo "exit $status" >"$steps/$name.status"
  fi
  say "== $name: $(cat "$steps/$name.status") ($((SECONDS - started)) s)"
}

# ---- loading: every binary and library resolves its libraries from the bundle, CUDA or the C/C++ runtime ----
source scripts/gpu-libraries.sh
check_loading() {
  local failures=0
  for file in "$bin"/* "$root"/lib/*; do
    while read -r soname arrow path _; do
      [ "$arrow" = "=>" ] || continue
      case "$path" in
        not) echo "$(basename "$file"): $soname not found"; failures=$((failures + 1)); continue ;;
        "$root"/lib/*) continue ;;
      esac
      is_c_runtime "$soname" && continue
      local in_cuda=0
      for dir in "${cuda_dirs[@]}"; do [[ "$path" == "$dir"/* ]] && in_cuda=1; done
      [ $in_cuda = 1 ] && is_cuda_library "$soname" && continue
      echo "$(basename "$file"): $soname comes from $path, neither the bundle's nor the machine's CUDA"
      failures=$((failures + 1))
    done < <(ldd "$file" 2>&1)
  done
  # Opened with dlopen, so no dependency list names them: OpenBLAS (carried) and cuBLAS (the machine's).
  [ -e "$root/lib/libopenblas.so.0" ] || { echo "libopenblas.so.0 is not in the bundle"; failures=$((failures + 1)); }
  [ "$(find_library libcublas.so.13)" != "not found" ] || { echo "libcublas.so.13 is in no CUDA folder"; failures=$((failures + 1)); }
  local needed
  needed=$(objdump -T "$bin"/* "$root"/lib/libsyncgrad.so 2>/dev/null | grep -o 'GLIBC_[0-9.]*\|GLIBCXX_[0-9.]*' |
    sort -uV | awk -F_ '{newest[$1] = $0} END {print newest["GLIBC"] ", " newest["GLIBCXX"]}')
  echo "$failures libraries unresolved; the newest C/C++ runtime symbols it needs: $needed"
  [ $failures = 0 ]
}
step loading 60 check_loading

if [ $has_gpu = 0 ]; then
  # Each program starts with the bundle's libraries alone (the suite exits 77: no GPU) ...
  step suite-without-gpu 60 bash -c '"$1"/test_cuda; status=$?; [ $status = 77 ] && echo "exit 77: skipped, as it must be without a GPU"; [ $status = 77 ]' _ "$bin"
  step programs-start 60 bash -c 'for p in train_cnn train_resnet train_gpt sgrun bench_models; do "$1/$p" --help >/dev/null || { echo "$p --help failed"; exit 1; }; done; "$1"/bench_gpu && "$1"/bench_cudnn_algorithms' _ "$bin"
  # ... and the carry fits: the bundle plus the working tree (tracked and untracked, not ignored, files).
  carry_size() {
    local tree bundled
    tree=$(git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    bundled=$(du -sb "$bundle" | cut -f1)
    awk -v t="$tree" -v b="$bundled" -v limit=$carry_limit_mib 'BEGIN {
      printf "carry: %.1f MiB (bundle %.1f MiB + working tree %.1f MiB), limit %d MiB\n", (t + b) / 1048576, b / 1048576, t / 1048576, limit
      exit (t + b > limit * 1048576) }'
  }
  step carry 30 carry_size
else
  data="$root/data/fashion-mnist"
  # a. every GPU op against the CPU on the same inputs
  step cuda-suite 170 "$bin/test_cuda"
  # every cuDNN algorithm's time and error at the CNN's 5x5 shape: what the convolutions' choice gives up
  step cudnn-algorithms 40 "$bin/bench_cudnn_algorithms"
  step cudnn-algorithms-pytorch 60 python3 bench/conv_accuracy_torch.py  # PyTorch's own error there
  # b. the CNN for one epoch: f32, then mixed precision
  step cnn-f32 60 "$bin/train_cnn" --device cuda --epochs 1 --data-dir "$data" --workers 2
  step cnn-f16 60 "$bin/train_cnn" --device cuda --epochs 1 --data-dir "$data" --workers 2 --amp f16
  step cnn-bf16 60 "$bin/train_cnn" --device cuda --epochs 1 --data-dir "$data" --workers 2 --amp bf16
  # d. DDP over NCCL: one GPU, so one rank (NCCL refuses two on one GPU); the suite ran every collective on it
  step nccl-ddp 60 "$bin/sgrun" --standalone --nproc-per-node 1 "$bin/train_cnn" --device cuda --epochs 1 \
    --data-dir "$data" --train-subset 19200 --test-subset 2000
  # c + e. training steps (loss finite and falling) and their speed beside PyTorch eager on this GPU
  reference=bench/reference
  models=(--steps 20 --warmup 3)
  step resnet34-f32 60 "$bin/bench_models" --device cuda --model resnet34 --image-size 224 --batch 32 "${models[@]}"
  step resnet34-f32-pytorch 60 python3 "$reference/resnet_torch.py" bench --device cuda --model resnet34 --image-size 224 --batch 32 --steps 20 --warmup 3
  step resnet34-tf32 60 "$bin/bench_models" --device cuda --model resnet34 --image-size 224 --batch 32 --tf32 "${models[@]}"
  step resnet34-tf32-pytorch 60 python3 "$reference/resnet_torch.py" bench --device cuda --model resnet34 --image-size 224 --batch 32 --tf32 --steps 20 --warmup 3
  step resnet34-bf16 60 "$bin/bench_models" --device cuda --model resnet34 --image-size 224 --batch 32 --amp bf16 "${models[@]}"
  step resnet34-bf16-pytorch 60 python3 "$reference/resnet_torch.py" bench --device cuda --model resnet34 --image-size 224 --batch 32 --amp bf16 --steps 20 --warmup 3
  step gpt-mini-f32 60 "$bin/bench_models" --device cuda --model gpt-mini --batch 64 --block 128 "${models[@]}"
  step gpt-mini-bf16 60 "$bin/bench_models" --device cuda --model gpt-mini --batch 64 --block 128 --amp bf16 "${models[@]}"
  step gpt-mini-bf16-pytorch 60 python3 "$reference/gpt_torch.py" --device cuda --model gpt-mini --batch 64 --block 128 --amp bf16 --steps 20 --warmup 3
  step gpt-mini-f16 60 "$bin/bench_models" --device cuda --model gpt-mini --batch 64 --block 128 --amp f16 "${models[@]}"
  step cnn-step 45 "$bin/bench_models" --device cuda --model cnn --batch 64 --steps 50 --warmup 5
  step cnn-step-pytorch 45 python3 "$reference/cnn_torch.py" --device cuda --batch 64 --steps 50
  step kernels 60 "$bin/bench_gpu" --sizes 4096,8192 --attention 8,12,1024,64
  step kernels-pytorch 60 python3 bench/gpu_torch.py --sizes 4096,8192 --attention 8,12,1024,64
fi

python3 scripts/gpu_report.py "$steps" "$work/machine.txt" >"$out/gpu-report.md"
status=$?
cat "$out/gpu-report.md"
exit $status
