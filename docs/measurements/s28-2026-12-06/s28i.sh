#!/usr/bin/env bash
# Session 28, device round 9: the HF gate on a head_dim-128 shape (8b-l4: the untied 8B shape cut to
# 4 layers), the one that runs the wgmma prefill attention (tiny and the default model are head_dim 64
# and keep the mma.sync layout, so round 5's gate did not reach the new kernel).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28i.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
SKIP_SUITE=1 GATE_TIMEOUT=150 bash scripts/dev/check.sh build $out/chk "8b-l4" > $out/check.log 2>&1
grep -E "gate exit|PASS|FAIL|mean|p99" $out/check.log | tail -8
grep -c wgmma $out/chk/*.json 2>/dev/null | head -3
