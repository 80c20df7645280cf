#!/usr/bin/env bash
# Session 36, device round 5 (the last ~249 s of the session's device time): the decode attention
# change (decode::used_bound, the block-table entry one issue ahead) checked and timed against the
# kernel before it (build/kernels-old/attention.fatbin, compiled here from the previous commit),
# then kern bench's decode steps, then the TP test (RanksExecutor's call-by-call interleave).
# Each step appends to $OUT/results.log as it ends.
# It never ran (session 36's device time ran out: "too little device-machine time is left to start
# another machine"). It needs build/kernels-old/attention.fatbin, the kernel before the change,
# made here (scripts/dev/pack.sh then packs it with the rest, every *.fatbin under build/):
#   mkdir -p /tmp/oldsrc build/kernels-old && git archive e263050~1 kernels | tar -x -C /tmp/oldsrc
#   nvcc -fatbin -O3 -std=c++17 -I/tmp/oldsrc/kernels -gencode arch=compute_90a,code=sm_90a \
#     -o build/kernels-old/attention.fatbin /tmp/oldsrc/kernels/attention.cu
#   cp build/kernels/test_attention.fatbin build/kernels-old/
#   bash scripts/dev/pack.sh build .devrun/pack.txz
# Run (carry [".devrun"]): bash docs/measurements/s36-2026-12-07/s36d.sh $OUT
set -u
out=$1
R=$out/results.log
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
(cd build && timeout 60 $K --gtest_filter='AttnDecodeGpu.*' > /tmp/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED|Failure" /tmp/attn.log | head -30 >> $R
for v in new old; do
  d=$root/build/kernels; [ $v = old ] && d=$root/build/kernels-old
  (cd build && KERN_KERNELS_DIR=$d timeout 50 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > /tmp/perf-$v.log 2>&1)
  echo "perf $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "warp split 128 grid 396 .* us per layer|mma split 256 .* seqs 64 len 1024 us per layer" /tmp/perf-$v.log | sed "s/^/$v /" >> $R
done
timeout 40 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
timeout 60 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool \
  --contexts 1024 --prefill 512 --batches 1,8,64,256 > /tmp/bench.txt 2>&1; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^$/p' /tmp/bench.txt | head -7 >> $R
(cd build && timeout 60 tests/gpu/serve/test_tp_gpu > /tmp/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\] [0-9]+ rows|Failure|OK \]|FAILED" /tmp/tp.log | head -8 >> $R
cat $R
