#!/usr/bin/env bash
# Session 22, device round 1: the head-major page layout experiment for decode attention. The _hm
# kernels (the production warp and mma partials over K / V blocks laid [kv_heads][page][hd]) are
# checked bitwise against the production kernels over the production layout, then timed beside
# them in the length-only sweep; Nsight Compute on both warp kernels at 64 x 1k (kern serve's
# concurrency-64 call).
set -u
out=$1
t0=$(date +%s)
L=/tmp/logs
R=$L/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs $L
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
K=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 300 $K --gtest_filter='AttentionPrefillMmaGpu.*:AttnDecodeGpu.HeadMajorLayoutGivesTheSameBits:AttnDecodeGpu.WarpTuningPointsGiveTheWarpKernelsBits:AttnDecodeGpu.LengthOnlySplitIsBatchInvariant:PerfGpu.DecodeAttentionLengthOnlySplit' > $L/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED|us per layer|memcpy|Failure|memcmp" $L/attn.log | grep -v "rel err" >> $R
for kind in warp warp_hm; do
  KERN_DECODE_ONCE_KIND=$kind timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats -k regex:kern_attn_decode_.*partial --launch-skip 1 -c 1 \
    $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $L/ncu-$kind.txt 2>&1; echo "ncu $kind rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Stall|Max Bandwidth|Mem Busy" $L/ncu-$kind.txt | head -30 >> $R
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
