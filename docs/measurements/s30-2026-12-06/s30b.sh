#!/usr/bin/env bash
# Session 30, device round 2: the ws points' bitwise test (fixed: same keys per stage), the per-call
# cost sweep (64 sequences, 512 .. 4,096 keys, 8 layers per graph), and Nsight Compute on the ws and
# warp partials at 64 x 1k and 64 x 4k. Run (carry [".devrun"], small pack .devrun/r.txz):
#   bash docs/measurements/s30-2026-12-06/s30b.sh $OUT
set -u
out=$1
tar -xJf .devrun/r.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/results.log
timeout 60 $t --gtest_filter='AttnDecodeGpu.WarpSpecialised*' > $out/correct.log 2>&1
echo "bitwise rc $?" >> $out/results.log
grep -E "OK \]|FAILED  \]" $out/correct.log | head >> $out/results.log
timeout 200 $t --gtest_filter='PerfGpu.DecodeAttentionPerCallCost' > $out/perf.log 2>&1
echo "perf rc $?" >> $out/results.log
grep -E "us|memcpy" $out/perf.log | grep figure | sed 's/^.*decode per-call //' >> $out/results.log
for kl in ws:1024 warp:1024 ws:4096 wsh:1024; do
  k=${kl%%:*}; l=${kl##*:}
  KERN_DECODE_ONCE_KIND=$k KERN_DECODE_ONCE_LEN=$l timeout 100 ncu --clock-control none \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats \
    -k regex:"kern_attn_decode_${k}_partial_hd128\$" --launch-skip 1 -c 1 \
    $t --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $out/ncu-$k-$l.txt 2>&1
  echo "ncu $k $l rc $?" >> $out/results.log
  grep -E "^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Issue Slots Busy|L2 Hit Rate|Mem Busy|Max Bandwidth|Warp Cycles Per Issued|No Eligible)" $out/ncu-$k-$l.txt | sed "s/^/  $k $l /" >> $out/results.log
done
cat $out/results.log
