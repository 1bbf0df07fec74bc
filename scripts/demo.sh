#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the quickstart example (a model fit
# with autograd). The Fashion-MNIST training app replaces it when nn/ and data/ land.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/examples/quickstart
