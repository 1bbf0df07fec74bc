#!/usr/bin/env bash
# Checks that the C++ sources follow .clang-format (Debian's clang-format, version 14).
#   scripts/check-format.sh            every tracked source file (what CI runs)
#   scripts/check-format.sh REVISION   only the files changed since REVISION (e.g. origin/main)
# Fix what it reports with: clang-format -i FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2; exit 1; }

sources='\.(h|cpp|cu|cuh)$'
if [ $# -gt 0 ]; then
  mapfile -t files < <(git diff --name-only --diff-filter=d "$1" -- | grep -E "$sources" || true)
else
  mapfile -t files < <(git ls-files | grep -E "$sources")
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: no C++ files to check"
  exit 0
fi

unformatted=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if [ ${#unformatted[@]} -ne 0 ]; then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "check-format: run 'clang-format -i' on them (clang-format $(clang-format --version | grep -o '[0-9]*\.[0-9.]*' | head -1))" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
