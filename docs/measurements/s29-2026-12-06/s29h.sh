#!/usr/bin/env bash
# Session 29, device round 8: PerfGpu.PrefillMma with ws3 in the list (round 7 checked ws3 but its timing
# list lacked the entry). Run (carry [".devrun"], small pack .devrun/r.txz): bash docs/measurements/s29-2026-12-06/s29h.sh $OUT
set -u
out=$1
tar -xJf .devrun/r.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/results.log
timeout 100 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $?" >> $out/results.log; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $out/results.log
cat $out/results.log
