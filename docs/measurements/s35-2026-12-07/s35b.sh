#!/usr/bin/env bash
# Session 35, device round 2: what decides the next changes for issue 17's decode step at 64 rows.
#  - the cuBLASLt candidates sweep with their bit hashes, if round 1 did not get to it
#    (PerfGpuGemm.DecodeCandidatesAcrossBatchSizes);
#  - the warp-item decode attention at 64 × 1k (kern serve's concurrency 64) under Nsight Compute,
#    the full set and the per-instruction SASS table (stall reasons per instruction), and its
#    per-call cost line (PerfGpu.DecodeAttentionPerCallCost).
# Run (carry [".devrun"]): bash docs/measurements/s35-2026-12-07/s35b.sh $OUT [sweep: 1 to run it]
set -u
out=$1
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
tar -xJf .devrun/pack.txz
export KERN_KERNELS_DIR=$(pwd -P)/build/kernels
if [ "${2:-0}" = 1 ]; then
  (cd build && timeout 150 tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $out/gemm-cand.log 2>&1)
  echo "sweep rc $? ($(( $(date +%s) - t0 )) s)" >> $R
fi
K=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 120 $K --gtest_filter=PerfGpu.DecodeAttentionPerCallCost > $out/percall.log 2>&1
echo "per-call rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep figure $out/percall.log | sed 's/^.*decode per-call //' >> $R
timeout 150 ncu --clock-control none --set full --import-source yes -k regex:"kern_attn_decode_warp_partial_hd128\$" \
  --launch-skip 1 -c 1 -o $out/ncu-warp $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $out/ncu-warp.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
ncu --import $out/ncu-warp.ncu-rep --page details > $out/ncu-warp.txt 2>&1
ncu --import $out/ncu-warp.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $out/ncu-warp-sass.csv.gz
grep -E "^    (Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Issue Slots Busy|L2 Hit Rate|Mem Busy|Max Bandwidth|Warp Cycles Per Issued|No Eligible|Registers Per Thread|Executed Instructions )" $out/ncu-warp.txt >> $R
rm -f $out/ncu-warp.ncu-rep
cat $R
