#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine into gpu-bundle/ (git-ignored), small enough to carry.
#
#   scripts/gpu-bundle.sh            # build-gpu/ (Release, sm_90, portable), then gpu-bundle/syncgrad-gpu.tar.xz
#
# The GPU machines it is made for (docs/cuda.md, "Proving it on a GPU") have the CUDA toolkit, its libraries
# and python3 with PyTorch, but no Debian packages, no network and room for 64 MiB of carried files. So the
# bundle holds the binaries the check runs, libsyncgrad.so, every other shared library they load that is not
# part of the C/C++ runtime or of CUDA (OpenBLAS, oneDNN, protobuf, yaml-cpp, libjpeg, crcutil, libgomp, ...)
# and the Fashion-MNIST files; the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL) are found there. The build is
# portable (SG_NATIVE=OFF): the GPU machine's CPU is not this one. It is shared (one libsyncgrad.so instead of
# the library linked into every binary) and for sm_90 only (H100, H200), which keeps it small.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-gpu
bundle=gpu-bundle
binaries=(tests/test_cuda tests/nccl_worker apps/train_cnn apps/train_resnet apps/train_gpt apps/sgrun
          bench/bench_gpu bench/bench_models bench/bench_cudnn_algorithms)
fashion_mnist=/usr/share/datasets/fashion-mnist  # the Debian package dataset-fashion-mnist

scripts/setup.sh
[ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-bundle: needs the CUDA toolkit at /usr/local/cuda" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSG_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=ON -DSG_BUILD_EXAMPLES=OFF >/dev/null
targets=()
for binary in "${binaries[@]}"; do targets+=(--target "$(basename "$binary")"); done
cmake --build "$build" -j"$jobs" "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/syncgrad-gpu/bin" "$stage/syncgrad-gpu/lib" "$stage/syncgrad-gpu/data/fashion-mnist"
root="$stage/syncgrad-gpu"
for binary in "${binaries[@]}"; do install -m 755 -s "$build/$binary" "$root/bin/"; done
install -m 755 -s "$build/libsyncgrad.so" "$root/lib/"
# OpenBLAS is opened with dlopen (core/cpu/blas.cpp), so no binary's dependency list names it.
openblas=$(pkg-config --variable=libdir openblas)/libopenblas.so.0
install -m 644 "$(readlink -f "$openblas")" "$root/lib/libopenblas.so.0"
cp "$fashion_mnist"/*-ubyte.gz "$root/data/fashion-mnist/"

# Every library the binaries load, by its soname, except those the GPU machine has (the C/C++ runtime, in a
# version at least as new: gpu-check.sh's dry run says which symbol versions are needed; and CUDA's).
source scripts/gpu-libraries.sh
for file in "$root"/bin/* "$root"/lib/*; do
  LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64" ldd "$file" | while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_c_runtime "$soname" || is_cuda_library "$soname" && continue
    [ -e "$root/lib/$soname" ] && continue
    [ "$path" = "not" ] && { echo "gpu-bundle: $file needs $soname, which is not installed here" >&2; exit 1; }
    install -m 644 "$(readlink -f "$path")" "$root/lib/$soname"
  done
done

git_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "syncgrad GPU bundle: commit $git_commit$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), built $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "build: Release, CUDA $(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_90, portable x86-64 (SG_NATIVE=OFF), shared libsyncgrad"
  (cd "$root" && find bin lib data -type f -printf '%s %p\n' | sort -k2)
} >"$root/MANIFEST"

# Packed beside the old bundle and renamed over it, so an interrupted run leaves the old one whole.
tar -C "$stage" -cf - syncgrad-gpu | xz -9 -T0 >"$stage/syncgrad-gpu.tar.xz"
mkdir -p "$bundle"
cp "$root/MANIFEST" "$bundle/MANIFEST.new"
mv "$stage/syncgrad-gpu.tar.xz" "$bundle/syncgrad-gpu.tar.xz.new"
mv "$bundle/syncgrad-gpu.tar.xz.new" "$bundle/syncgrad-gpu.tar.xz"
mv "$bundle/MANIFEST.new" "$bundle/MANIFEST"
mib() { awk -v bytes="$1" 'BEGIN {printf "%.1f", bytes / 1048576}'; }
echo "gpu-bundle: $bundle/syncgrad-gpu.tar.xz is $(mib "$(stat -c %s "$bundle/syncgrad-gpu.tar.xz")") MiB" \
  "($(mib "$(du -sb "$root" | cut -f1)") MiB unpacked): $(ls "$root/bin" | wc -l) binaries, $(ls "$root/lib" | wc -l)" \
  "libraries, Fashion-MNIST"
