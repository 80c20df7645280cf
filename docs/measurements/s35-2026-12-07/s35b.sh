#!/usr/bin/env bash
# Session 35, device round 2: what decides the next changes for issue 17's decode step.
#  - if asked (second arg 1): the per-m equivalent GEMM answers and the candidates' bit hashes
#    (round 1's sweep(), when round 1 did not get to them);
#  - kern bench --batches 1,8,64,256 on the 4B shape (kern serve's runner, GPU step per batch) without
#    and with --gemm-per-m, in the same call (the step-time effect of algo_per_m);
#  - the warp-item decode attention at 64 × 1k under Nsight Compute (full set, per-instruction SASS
#    table) and its per-call cost line, with the time left.
# Run (carry [".devrun"]): bash docs/measurements/s35-2026-12-07/s35b.sh $OUT [1] [seconds, 560]
set -u
out=$1
limit=${3:-560}
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - t0) )); }
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
if [ "${2:-0}" = 1 ]; then
  (cd build && timeout 90 tests/gpu/runtime/test_runtime_gpu --gtest_filter='PerfGpuGemm.PerMEquivalentAnswers:RuntimeGpuGemmInvariance.*' > $out/gemm-per-m.log 2>&1)
  echo "per-m rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "^\[per-m\] step|OK \]|FAILED|Failure" $out/gemm-per-m.log >> $R
  (cd build && timeout 150 tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $out/gemm-cand.log 2>&1)
  echo "sweep rc $? ($(( $(date +%s) - t0 )) s)" >> $R
fi
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
timeout 120 $k synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
for v in one per-m one2; do
  t=$(left); [ $t -gt 150 ] && t=150
  [ $t -gt 40 ] || { echo "bench $v not run: $t s left" >> $R; continue; }
  extra=""; [ $v = per-m ] && extra="--gemm-per-m"
  KERN_LOG=info timeout $t $k bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool \
    --contexts 1024 --prefill 512 --batches 1,8,64,256 $extra > $out/bench-$v.txt 2> $out/bench-$v.err
  echo "bench $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  sed -n '/^decode at batch B/,/^$/p' $out/bench-$v.txt | head -7 >> $R
  grep -E "warn|error" $out/bench-$v.err | head -5 >> $R
done
K=build/tests/gpu/kernels/kern_kernels_gpu_test
t=$(left); [ $t -gt 120 ] && t=120
if [ $t -gt 40 ]; then
  timeout $t ncu --clock-control none --set full -k regex:"kern_attn_decode_warp_partial_hd128\$" --launch-skip 1 -c 1 \
    -o $out/ncu-warp $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $out/ncu-warp.log 2>&1
  echo "ncu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  ncu --import $out/ncu-warp.ncu-rep --page details > $out/ncu-warp.txt 2>&1
  ncu --import $out/ncu-warp.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -9 > $out/ncu-warp-sass.csv.gz
  grep -E "^    (Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|L2 Hit Rate|Warp Cycles Per Issued|No Eligible|Registers Per Thread|Executed Instructions )" $out/ncu-warp.txt >> $R
  rm -f $out/ncu-warp.ncu-rep
fi
cat $R
