#!/usr/bin/env bash
# Session 30, device round 1: the warp-specialised decode attention (kernels/attention_decode_ws.cuh,
# test-only entries) against float64 and bitwise across its points, then the length-only timing sweep
# beside the warp kernel. Run (carry [".devrun"], small pack .devrun/r.txz):
#   bash docs/measurements/s30-2026-12-06/s30a.sh $OUT
set -u
out=$1
tar -xJf .devrun/r.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/results.log
timeout 240 $t --gtest_filter='AttnDecodeGpu.*' > $out/correct.log 2>&1
echo "correct rc $?" >> $out/results.log
grep -E "^\[  (FAILED|PASSED) |OK \]|FAILED  \]" $out/correct.log | head -40 >> $out/results.log
grep -E "Failure|Expected|differs|Which is" $out/correct.log | head -30 >> $out/results.log
timeout 240 $t --gtest_filter='PerfGpu.DecodeAttentionLengthOnlySplit' > $out/perf.log 2>&1
echo "perf rc $?" >> $out/results.log
grep -E "us per layer|memcpy" $out/perf.log | sed 's/^.*decode length-only //' >> $out/results.log
cat $out/results.log
