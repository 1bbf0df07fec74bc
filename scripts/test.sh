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
# Runs one step and says how long it took, so a slow step shows in the log.
step() {
  local started=$SECONDS
  "$@"
  echo "test.sh: '$*' took $((SECONDS - started)) s (${SECONDS} s so far)"
}
jobs=$(nproc 2>/dev/null || echo 2)
step scripts/setup.sh
step scripts/check-format.sh  # cheap, so first: the sources follow .clang-format
step scripts/build.sh
step scripts/tensorboard-venv.sh  # tests/test_summary_writer.cpp reads event files back with TensorBoard
step ctest --test-dir build --output-on-failure -j"$jobs"
[ $all = 1 ] || exit 0
step scripts/tsan-test.sh  # in build-tsan/
step scripts/fuzz.sh --all 30
step scripts/multinode-test.sh build  # it says SKIPPED where it cannot have root or namespaces
step scripts/gpu-bundle.sh            # build-gpu/ and gpu-bundle/
step scripts/gpu-check.sh gpu-bundle build/gpu-check  # without a GPU: the bundle loads, runs and fits the carry
