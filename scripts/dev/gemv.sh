#!/usr/bin/env bash
# GPU round for the gemv helper: the GEMV kernel tests and their bandwidth figures.
# Usage: bash scripts/dev/gemv.sh <build-dir> <out-dir>   (writes <out-dir>/gemv.log; < 120 s)
set -uo pipefail
build=${1:?build dir}
out=${2:?out dir}
mkdir -p "$out"
log="$out/gemv.log"
{
  echo "== gemv round $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null)"
  KERN_KERNELS_DIR="$build/kernels" timeout 110 "$build/tests/gpu/kernels/kern_kernels_gpu_test" \
    --gtest_filter='*Gemv*' --gtest_color=no
  echo "== exit $?"
} 2>&1 | tee "$log"
