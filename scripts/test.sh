#!/usr/bin/env bash
# Installs dependencies, builds, and runs the test suite.
#   scripts/test.sh         the unit suite (ctest): what a newcomer runs after a change
#   scripts/test.sh --all   the unit suite, then what CI adds (docs/testing.md): the tests of syncgrad's own
#                           threads under ThreadSanitizer, each parser's fuzz target for 30 s, two hosts made of
#                           network namespaces, and the GPU bundle built and dry-run (docs/cuda.md)
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case "${1:-}" in
  "") ;;
  --all) all=1 ;;
  *) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
scripts/setup.sh
scripts/check-format.sh  # cheap, so first: the sources follow .clang-format
scripts/build.sh
scripts/tensorboard-venv.sh  # tests/test_summary_writer.cpp reads event files back with TensorBoard
jobs=$(nproc 2>/dev/null || echo 2)
(cd build && ctest --output-on-failure -j"$jobs")
[ $all = 1 ] || exit 0
scripts/tsan-test.sh  # in build-tsan/
scripts/fuzz.sh --all 30
scripts/multinode-test.sh build  # it says SKIPPED where it cannot have root or namespaces
scripts/gpu-bundle.sh  # build-gpu/ and gpu-bundle/
scripts/gpu-check.sh gpu-bundle build/gpu-check  # without a GPU: the bundle loads, runs and fits the carry
