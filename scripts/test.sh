#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh  # cheap, so first: the sources follow .clang-format
scripts/build.sh
scripts/tensorboard-venv.sh  # tests/test_summary_writer.cpp reads event files back with TensorBoard
jobs=$(nproc 2>/dev/null || echo 2)
(cd build && ctest --output-on-failure -j"$jobs")
scripts/tsan-test.sh  # the tests of syncgrad's own threads under ThreadSanitizer, in build-tsan/
# Beyond the unit tests (docs/testing.md): each parser's fuzz target for 30 s, and two hosts made
# of network namespaces (it says SKIPPED where it cannot have root or namespaces).
scripts/fuzz.sh --all 30
scripts/multinode-test.sh build
