#!/usr/bin/env bash
# Configures and builds kern into ${KERN_BUILD_DIR:-build} (Ninja, RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KERN_BUILD_DIR:-build}
cuda=ON
[ -x /usr/local/cuda/bin/nvcc ] || cuda=OFF
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERN_BUILD_CUDA=$cuda "$@" >/dev/null
ninja -C "$build" -j"$(nproc)"
