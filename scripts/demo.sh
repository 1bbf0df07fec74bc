#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains the CNN on Fashion-MNIST (4 epochs,
# batch 64, Adam lr 0.005), printing progress and the test accuracy after every epoch.
# Extra arguments go to train_cnn (see build/apps/train_cnn --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
threads=$(nproc 2>/dev/null || echo 1)
build/apps/train_cnn --threads "$threads" --log build/train_cnn.csv "$@"
