#!/usr/bin/env bash
# Session 21, device round 1: the warp-item decode attention's tuning points (bitwise against the
# warp kernel, then the length-only sweep), Nsight Compute on the warp kernel at 64 x 1k (as kern
# serve runs it at concurrency 64), the cuBLASLt candidates for the decode GEMMs, the sampling op's
# forced rows, the engine and HTTP GPU tests (RoPE at one row per block, the host tier, prompt
# log-probs against transformers).
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
timeout 200 $K --gtest_filter='AttnDecodeGpu.*:SampleGpu.ForcedTokensGiveTheirLogprobs:SampleGpu.GreedyMatchesReferenceAndArgmax:SampleGpu.LogprobsAndTopIds:SampleGpu.MixedSettingsAndOutOfRangeParameters:PerfGpu.DecodeAttentionLengthOnlySplit' > $L/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED|us per layer|memcpy" $L/attn.log | grep -v "rel err" >> $R
for kind in warp; do
  KERN_DECODE_ONCE_KIND=$kind timeout 120 ncu --clock-control none --set full -k regex:kern_attn_decode_ --launch-skip 2 -c 1 \
    $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $L/ncu-$kind.txt 2>&1; echo "ncu $kind rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Registers Per|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Active Warps Per" $L/ncu-$kind.txt | head -40 >> $R
done
timeout 120 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $L/gemm-cand.log 2>&1; echo "gemm candidates rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[cand\]|FAILED|OK \]" $L/gemm-cand.log >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
timeout 240 build/tests/gpu/serve/test_serve_gpu > $L/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED" $L/serve-gpu.log | grep -v "first difference" >> $R
(cd build && timeout 300 ctest -R 'ServeGpu' --output-on-failure > $L/serve-ctest.log 2>&1); echo "serve ctest rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "Test +#|tests passed|park|wake" $L/serve-ctest.log | tail -12 >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
