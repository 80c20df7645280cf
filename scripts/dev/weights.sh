#!/usr/bin/env bash
# GPU round for the pipelined weight loader: correctness (bitwise vs host, strided, multi-slab,
# truncated file), the cuMemcpy2DAsync probe, load GB/s on a ~2 GB synthetic checkpoint, and the
# runtime's weight tests through load_weights. Log: <out-dir>/weights.log. Budget: < 120 s.
# Usage: bash scripts/dev/weights.sh <build-dir> <out-dir>
. "$(dirname "$0")/common.sh"
dev_round weights /tmp/weights-out "$@"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
run() {  # run <seconds> <cmd...>: never past 110 s of script time
  local limit=$1; shift
  local left=$((110 - SECONDS))
  if [ "$left" -lt 5 ]; then say "skipped (time budget): $*"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "+ $*"
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  say "rc=${PIPESTATUS[0]}"
}
say "weights: $(date -u +%FT%TZ) $(hostname) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say "cores: $(nproc), mem: $(free -g | awk '/Mem:/{print $2" GiB, "$7" GiB available"}'), /tmp: $(df -h /tmp | awk 'NR==2{print $4" free"}')"
# Executables at their build paths (the build dir may be a symlink: find -L as a fallback).
exe() {
  local p="$build/$1"
  [ -x "$p" ] || p=$(find -L "$build" -name "$(basename "$1")" -type f 2>/dev/null | head -1)
  [ -n "$p" ] && [ -x "$p" ] && echo "$p"
}
loader=$(exe tests/gpu/runtime/test_weight_loader_gpu)
host=$(exe tests/host/runtime/test_weight_loader)
rtgpu=$(exe tests/gpu/runtime/test_runtime_gpu)
say "build $build -> $(cd "$build" 2>/dev/null && pwd -P); loader: ${loader:-none}; host: ${host:-none}; runtime: ${rtgpu:-none}"
[ -n "$host" ] && run 15 "$host" --gtest_brief=1
if [ -n "$loader" ]; then
  run 20 "$loader" --gtest_filter='WeightLoaderGpu.Probe2dCopyFromPinned:WeightLoaderGpu.ManyThreads*:WeightLoaderGpu.Truncated*'
  KERN_LOADER_SPEED_GB=${KERN_LOADER_SPEED_GB:-2} run 35 "$loader" --gtest_filter='WeightLoaderGpu.Speed*'
  # a second layout: 8 slabs of 32 MiB (half the pinned memory to allocate), 4 MiB reads
  KERN_LOAD_SLABS=8 KERN_LOAD_SLAB_MIB=32 KERN_LOAD_READ_MIB=4 KERN_LOADER_SPEED_GB=2 \
    run 25 "$loader" --gtest_filter='WeightLoaderGpu.Speed*'
else
  say "weights: test_weight_loader_gpu not built under $build; there: $(ls "$build/tests/gpu/runtime" 2>&1 | tr '\n' ' ')"
fi
if [ -n "$rtgpu" ]; then
  KERN_LOG=info run 10 "$rtgpu" --gtest_filter='RuntimeGpuWeights.*'
  KERN_LOAD_THREADS=1 KERN_LOAD_2D=0 run 10 "$rtgpu" --gtest_filter='RuntimeGpuWeights.*'
fi
say "weights: done $(date -u +%FT%TZ)"
