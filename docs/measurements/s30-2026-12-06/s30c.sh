#!/usr/bin/env bash
# Session 30, device round 3: is the warp-specialised decode partial's per-call cost at 64 sequences
# a matter of bytes in flight? The per-call sweep over fewer stages (ws2) and fewer pairs (grid 66,
# 132). Run (carry [".devrun"], small pack .devrun/r.txz): bash docs/measurements/s30-2026-12-06/s30c.sh $OUT
set -u
out=$1
tar -xJf .devrun/r.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/results.log
timeout 60 $t --gtest_filter='AttnDecodeGpu.WarpSpecialised*' > $out/correct.log 2>&1
echo "bitwise rc $?" >> $out/results.log
timeout 300 $t --gtest_filter='PerfGpu.DecodeAttentionPerCallCost' > $out/perf.log 2>&1
echo "perf rc $?" >> $out/results.log
grep -E "partial-only|memcpy" $out/perf.log | grep figure | sed 's/^.*decode per-call //' >> $out/results.log
cat $out/results.log
