#!/usr/bin/env bash
# Session 29, device round 1: (1) the warp-specialised wgmma prefill attention (test-only entries ws,
# wsnp, ws6) against float64 and bitwise against the two-warpgroup kernel; (2) the HF gate on a
# head_dim-128 shape (8b-l4), the first end-to-end check of kern gen's wgmma default (session 28's
# s28i.sh); (3) PerfGpu.PrefillMma with the new entries.
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29a.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
K=build/tests/gpu/kernels/kern_kernels_gpu_test
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
t0=$(date +%s)
timeout 150 $K --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad:AttentionPrefillMmaGpu.Repeatable' > $out/ws-check.log 2>&1
echo "ws check rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  |Failure|error|Expected|which is" $out/ws-check.log | head -30
t0=$(date +%s)
SKIP_SUITE=1 GATE_TIMEOUT=150 timeout 280 bash scripts/dev/check.sh build $out/chk "8b-l4" > $out/check.log 2>&1
echo "gate rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "gate exit|PASS|FAIL|mean|p99" $out/check.log | tail -8
t0=$(date +%s)
timeout 150 $K --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' | head -40
