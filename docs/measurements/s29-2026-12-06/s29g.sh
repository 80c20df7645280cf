#!/usr/bin/env bash
# Session 29, device round 7: three consumer warpgroups (test entry ws3: 192 queries per block, Q in shared
# memory, setmaxnreg 32 / 160) and tiles of 128 keys (ws128) against the production
# kernel (64 keys, four stages; its producer now copies in groups of 64 keys, the same code at BN 64):
# float64, bitwise and row-invariance checks, PerfGpu.PrefillMma.
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29g.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P)
export KERN_KERNELS_DIR=$root/build/kernels
T=build/tests/gpu/kernels/kern_kernels_gpu_test
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
timeout 150 $T --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad:AttentionPrefillMmaGpu.Repeatable' > $out/check.log 2>&1
echo "checks rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^\[  |Failure|Expected|which is" $out/check.log | head -20 >> $R
for v in wgmma_ws wgmma_ws128 wgmma_ws3; do
  grep "${v} rel err" $out/check.log | awk '{print $NF}' | sort -g | sed -n '1p;$p' | tr '\n' ' ' | sed "s/^/$v rel err min max: /" >> $R; echo >> $R
done
timeout 100 $T --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $?" >> $R; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $R
cat $R
