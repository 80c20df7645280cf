#!/usr/bin/env bash
# Session 29, device round 10: the review refactor (query_rows, load_q_fragments and pack_p shared by the
# wgmma kernels; the production cubin looked changed, not its arithmetic; later found byte-identical,
# docs/perf.md session 29): the kernel checks again (float64,
# ws3 bitwise ws, wsold bitwise the two-warpgroup kernel, row invariance, repeats) and the timings.
# Run (carry [".devrun"], small pack .devrun/r.txz): bash docs/measurements/s29-2026-12-06/s29j.sh $OUT
set -u
out=$1
tar -xJf .devrun/r.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
T=build/tests/gpu/kernels/kern_kernels_gpu_test
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
timeout 100 $T --gtest_filter='AttentionPrefillMmaGpu.*:-AttentionPrefillMmaGpu.Variant*Two*:AttentionPrefillMmaGpu.VariantM32*:AttentionPrefillMmaGpu.VariantFourWarps' > $out/check.log 2>&1
echo "checks rc $?" >> $R; grep -E "^\[  |Failure|Expected|which is" $out/check.log | tail -8 >> $R
timeout 60 $T --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $?" >> $R; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $R
cat $R
