#!/usr/bin/env bash
# Installs what syncgrad needs to build and test on Debian 12 (idempotent; root or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libeigen3-dev doctest-dev zlib1g-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libgloo-dev             # CPU collectives for dist/ (TCP transport)
  libopenblas-openmp-dev  # the OpenMP build of OpenBLAS follows sg::set_num_threads
  libstb-dev              # stb_image / stb_image_write: decoding PNG, BMP, GIF and writing PNG, JPEG (data/image.cpp)
  libjpeg62-turbo-dev     # libjpeg-turbo: decoding JPEG as PIL does (data/jpeg_decoder.cpp)
  libdnnl-dev             # oneDNN: the fast f32 CPU convolutions (OpenMP build, follows sg::set_num_threads too)
  libprotobuf-dev protobuf-compiler  # TensorBoard event files: log/tensorboard/event.proto, compiled by protoc
  libcrcutil-dev          # CRC-32C of the event files' records (log/crc32c.cpp)
  libxxhash-dev           # XXH64: the hash DDP's replica check compares across ranks (dist/replica_check.cpp)
  python3-venv            # scripts/tensorboard-venv.sh: TensorBoard's reader checks the event files in the tests
  dataset-fashion-mnist   # the IDX files under /usr/share/datasets/fashion-mnist
  libyaml-cpp-dev         # train_gpt reads the minGPT recipe's YAML config
  fortunes                # train_gpt's default corpus: the English fortunes under /usr/share/games/fortunes
  clang libclang-rt-dev libomp-dev  # scripts/fuzz.sh: libFuzzer targets (clang's OpenMP runtime for the library)
  clang-format            # scripts/check-format.sh: the sources follow .clang-format
  iproute2 python3        # scripts/multinode-test.sh: two hosts from network namespaces; comparing checkpoints
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
