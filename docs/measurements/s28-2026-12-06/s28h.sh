#!/usr/bin/env bash
# Session 28, device round 8: the wgmma prefill attention with one warpgroup per block (w1: two
# blocks per SM, two stages; w1p: pipelined, four stages), test-only: bitwise equal to the
# production entry (AttentionPrefillMmaGpu.VariantsWgmma) and timed beside it (PerfGpu.PrefillMma).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28h.sh $OUT
set -u
out=$1
tar -xJf .devrun/r2.txz
root=$(pwd -P)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
export KERN_KERNELS_DIR=$root/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 150 $t --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma' > $out/wgmma-tests.log 2>&1; echo "wgmma tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]" $out/wgmma-tests.log | head -8
grep -B2 -A10 "Failure" $out/wgmma-tests.log | head -30
timeout 150 $t --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1; echo "perf rc $?"
grep "figure\]" $out/perf.log | sed 's/^.*figure\] //' | grep -E "TFLOP/s" | grep -E "mma_s2 |wgmma"
