#!/usr/bin/env bash
# Session 29, device round 3 (s29c) and 4 (s29d, the same script): the producer copying its rows with the page lookups hoisted (all
# ws entries), descriptors advanced by offsets (every wgmma entry), the lean softmax (wsl, wsol):
# float64 and bitwise checks, PerfGpu.PrefillMma, Nsight Compute on wsnp and wsl at 8k.
# Round 4 adds wslp (turns) and wsls (sleepy producer); profiles wsls.
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29d.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P)
export KERN_KERNELS_DIR=$root/build/kernels
K=build/tests/gpu/kernels/kern_kernels_gpu_test
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
timeout 200 $K --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad:AttentionPrefillMmaGpu.Repeatable:AttentionPrefillMmaGpu.RowInvarianceQwen3' > $out/check.log 2>&1
echo "checks rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^\[  |Failure|Expected|which is|rel" $out/check.log | head -30 >> $R
t0=$(date +%s)
timeout 100 $K --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $R
for v in wgmma_wsls; do
  t0=$(date +%s)
  timeout 100 ncu --clock-control none --set full -k regex:"kern_attn_prefill_${v}_hd128\$" --launch-skip 3 -c 1 \
    -o /tmp/ncu-$v $K --gtest_filter=PerfGpu.PrefillWgmma8k > /tmp/ncu-$v.log 2>&1
  echo "ncu $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  ncu --import /tmp/ncu-$v.ncu-rep --page details > $out/ncu-$v.txt 2>&1
  ncu --import /tmp/ncu-$v.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $out/ncu-$v-sass.csv.gz
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2 Cache Throughput" $out/ncu-$v.txt | head -8 >> $R
done
cat $R
