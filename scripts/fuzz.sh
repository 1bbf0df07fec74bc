#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and runs them.
#   scripts/fuzz.sh --list             the target names, one a line
#   scripts/fuzz.sh TARGET SECONDS     fuzz one target for SECONDS
#   scripts/fuzz.sh --all SECONDS      every target, SECONDS each (what CI runs)
# Each run starts from the checked-in seeds in tests/fuzz/corpus/TARGET and keeps what it finds in
# build-fuzz/corpus/TARGET; a crash leaves its input in build-fuzz/findings/ and fails the script.
# Needs clang and libFuzzer (scripts/setup.sh installs them). docs/testing.md says what each target
# covers and the figures of the last long runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz

targets() { sed -n 's/^set(SG_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt | tr ' ' '\n'; }

usage() { echo "usage: scripts/fuzz.sh --list | TARGET SECONDS | --all SECONDS" >&2; exit 2; }

build_targets() {
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_FUZZ=ON \
    -DSG_CUDA=OFF -DSG_BUILD_TESTS=OFF -DSG_BUILD_BENCH=OFF -DSG_BUILD_EXAMPLES=OFF -DSG_BUILD_APPS=OFF \
    "${launcher[@]}" >/dev/null
  cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target "$@"
}

run_target() {
  local target=$1 seconds=$2
  mkdir -p "$build/corpus/$target" "$build/findings"
  echo "fuzz: $target for ${seconds}s"
  # -malloc_limit_mb: no input here is over 4 KiB, so any allocation over 64 MiB believed a header.
  # -timeout: one input taking 5 s is a hang. -close_fd_mask=1: the readers print nothing.
  local log="$build/findings/$target.log" status=0
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=64 \
    -max_len=4096 -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$build/findings/$target-" \
    "$build/corpus/$target" "tests/fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED (exit $status); the input is in $build/findings/, the log in $log" >&2
    return "$status"
  fi
  grep -E '^(#[0-9]+\s+DONE|stat::peak_rss_mb)' "$log" || true
}

case "${1:-}" in
  --list) targets ;;
  --all)
    [ $# -eq 2 ] || usage
    mapfile -t all < <(targets)
    build_targets "${all[@]}"
    for target in "${all[@]}"; do run_target "$target" "$2"; done ;;
  ""|-*) usage ;;
  *)
    [ $# -eq 2 ] || usage
    targets | grep -qx "$1" || { echo "fuzz: no target '$1'; scripts/fuzz.sh --list names them" >&2; exit 2; }
    build_targets "$1"
    run_target "$1" "$2" ;;
esac
