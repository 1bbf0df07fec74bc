#!/usr/bin/env bash
# Configures and builds syncgrad in ./build (Release); extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# The CUDA backend takes a third of the build. Where no GPU is visible its tests could only be
# skipped, so build/ leaves it out unless -DSG_CUDA=ON or AUTO is passed (or an earlier configuration
# of build/ chose ON); scripts/test.sh --all compiles it all the same, for sm_90, in build-gpu/.
cuda=()
if [[ " $* " != *" -DSG_CUDA="* ]] && ! grep -qs '^SG_CUDA:STRING=ON$' build/CMakeCache.txt &&
  ! nvidia-smi -L >/dev/null 2>&1; then
  echo "build: no GPU visible: build/ without the CUDA backend (scripts/build.sh -DSG_CUDA=AUTO builds it)"
  cuda=(-DSG_CUDA=OFF)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@"
cmake --build build -j"$jobs"
