#!/usr/bin/env bash
# Session 28, device round 4: the prefill attention on wgmma (kernels/attention_prefill_wgmma.cuh,
# test-only entry kern_attn_prefill_wgmma_hd128): against float64 and row invariance
# (AttentionPrefillMmaGpu.VariantWgmma), then its time beside the production mma kernel
# (PerfGpu.PrefillMma, 4B shape).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28d.sh $OUT
set -u
out=$1
tar -xJf .devrun/r1.txz
root=$(pwd -P)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > $out/machine.txt
cat $out/machine.txt
export KERN_KERNELS_DIR=$root/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 120 $t --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.Qwen3FirstChunkOddLength' > $out/wgmma-tests.log 2>&1; echo "wgmma tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|OK \]" $out/wgmma-tests.log | head -20
grep -B2 -A14 "Failure" $out/wgmma-tests.log | head -60
grep "figure\]" $out/wgmma-tests.log | head -12
timeout 200 $t --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1; echo "perf rc $?"
grep "figure\]" $out/perf.log | sed 's/^.*figure\] //' | grep -E "TFLOP/s" | grep -E "mma_s2 |wgmma |wgmma_pipe |fma " 
