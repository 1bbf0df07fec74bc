#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains the CNN on Fashion-MNIST data-parallel
# on 2 processes (sgrun, DDP over Gloo): 4 epochs, 32 images per process and step (the recipe's
# global batch of 64), Adam lr 0.005, printing progress and the test accuracy after every epoch.
# Extra arguments go to train_cnn (see build/apps/train_cnn --help); NPROC=1 trains on one process.
# It trains on the CPU wherever it runs (two processes cannot share one GPU under NCCL);
# DEVICE=cuda NPROC=<number of GPUs> trains on the GPUs instead (docs/cuda.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
nproc_per_node=${NPROC:-2}
cores=$(nproc 2>/dev/null || echo 1)
threads=$(( cores / nproc_per_node > 0 ? cores / nproc_per_node : 1 ))
build/apps/sgrun --standalone --nproc-per-node "$nproc_per_node" \
  build/apps/train_cnn --device "${DEVICE:-cpu}" --threads "$threads" --batch-size $(( 64 / nproc_per_node )) \
  --log build/train_cnn.csv "$@"
