#!/usr/bin/env bash
# (Refuted and reverted in session 40: the tuning point lives on only in decode-dyn.patch beside this script.)
# Session 40, device call 4: the warp-item decode attention with its items after the first from a
# ticket counter (kern_attn_decode_warp_dyn_partial_hd128, a test-only tuning point): its bits against
# the production kernel's (AttnDecodeGpu.*), its timing beside the production kernel in one binary
# (PerfGpu.DecodeAttentionLengthOnlySplit: µs per layer; PerfGpu.DecodeAttentionPerCallCost: the
# per-call intercept over 1k / 2k / 4k keys at 64 sequences).
# Run (carry [".devrun"]): bash docs/measurements/s40-2026-12-07/s40c.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
(cd build && timeout 200 $K --gtest_filter='AttnDecodeGpu.*' > $L/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -E "^\[  PASSED|^\[  FAILED|tests ran" $L/attn.log >> $R
(cd build && timeout 150 $K --gtest_filter='PerfGpu.DecodeAttentionLengthOnlySplit:PerfGpu.DecodeAttentionPerCallCost' > $L/perf.log 2>&1); echo "perf rc $? ($(el) s)" >> $R
grep -E "(warp|warp_dyn) split 128 grid 396 .*us per layer|partial-only|per-call" $L/perf.log | sed 's/\[figure\] decode //' >> $R
echo "total $(el) s" >> $R
cat $R
