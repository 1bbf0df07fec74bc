#!/usr/bin/env bash
# Creates a Python virtual environment with TensorBoard from PyPI (default: build/tensorboard-venv).
# tests/test_summary_writer.cpp reads the event files data::SummaryWriter writes back through
# TensorBoard's own reader in it (tests/reference/read_tensorboard.py); scripts/test.sh calls this,
# so CI runs that test instead of skipping it. Idempotent: an environment that already imports
# tensorboard is kept. Needs python3-venv (scripts/setup.sh installs it) and access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build/tensorboard-venv}
python=${PYTHON:-python3}
# The version the test was written against; its reader API (EventAccumulator) is stable across 2.x.
tensorboard_version=2.21.0

if "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  echo "tensorboard-venv: $venv already has tensorboard $("$venv/bin/python" -c 'import tensorboard; print(tensorboard.__version__)')"
  exit 0
fi
echo "tensorboard-venv: creating $venv with tensorboard $tensorboard_version"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "tensorboard==$tensorboard_version"
