#!/usr/bin/env bash
# Session 36, device round 2 (same warm H200 as round 1): the sampling op's batch-1 figures (round 1's
# sample.log did not come back), then session 35's s35b.sh without its sweep part: kern bench
# --batches 1,8,64,256 without and with --gemm-per-m, and Nsight Compute on the decode attention at
# 64 x 1k. Few files under $OUT (the device tool returns about eight).
# Run (carry [".devrun"]): bash docs/measurements/s36-2026-12-07/s36b.sh $OUT [seconds, 400]
set -u
out=$1
limit=${2:-400}
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - t0) )); }
[ -x build/bin/kern ] || tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
K=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 60 $K --gtest_filter=PerfGpu.Sample > /tmp/sample.log 2>&1; echo "sample perf rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[figure\]" /tmp/sample.log | grep -v "cluster kernel alone" >> $R
bash scripts/setup-tokenizer.sh > /tmp/setup-tokenizer.log 2>&1
[ -f /tmp/m4b/config.json ] || timeout 120 $k synth qwen3 --preset 4b -o /tmp/m4b > /tmp/synth.log 2>&1
echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
for v in one per-m; do
  t=$(left); [ $t -gt 130 ] && t=130
  [ $t -gt 40 ] || { echo "bench $v not run: $t s left" >> $R; continue; }
  extra=""; [ $v = per-m ] && extra="--gemm-per-m"
  KERN_LOG=info timeout $t $k bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool \
    --contexts 1024 --prefill 512 --batches 1,8,64,256 $extra > $out/bench-$v.txt 2> /tmp/bench-$v.err
  echo "bench $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  sed -n '/^decode at batch B/,/^$/p' $out/bench-$v.txt | head -7 >> $R
  grep -E "warn|error" /tmp/bench-$v.err | head -5 >> $R
done
t=$(left); [ $t -gt 110 ] && t=110
if [ $t -gt 40 ]; then
  timeout $t ncu --clock-control none --set full -k regex:"kern_attn_decode_warp_partial_hd128\$" --launch-skip 1 -c 1 \
    -o /tmp/ncu-warp $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > /tmp/ncu-warp.log 2>&1
  echo "ncu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  ncu --import /tmp/ncu-warp.ncu-rep --page details > $out/ncu-warp.txt 2>&1
  ncu --import /tmp/ncu-warp.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $out/ncu-warp-sass.csv.gz
  grep -E "^    (Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|L2 Hit Rate|Warp Cycles Per Issued|No Eligible|Registers Per Thread|Executed Instructions )" $out/ncu-warp.txt >> $R
  grep -E "figure|OK \]|FAILED" /tmp/ncu-warp.log | head -5 >> $R
fi
cat $R
