#!/usr/bin/env bash
# Session 37, device call 1: session 36's s36d.sh (the decode attention change, decode::used_bound and
# the block-table entry one issue ahead, checked and timed against the kernel before it in
# build/kernels-old; kern bench's decode steps; the TP test after the RanksExecutor interleave), then
# the GPU suite on this tree with the time left (the perf tests and the TP test excluded: run above;
# PerfGpuGemm.PerMEquivalentAnswers stays in: its lines time the per-m answers, now the fastest equal one).
# Build kernels-old as s36d.sh's header says, pack (scripts/dev/pack.sh), carry [".devrun"]:
#   bash docs/measurements/s37-2026-12-07/s37a.sh $OUT [seconds, 570]
set -u
out=$1
limit=${2:-570}
R=$out/results.log
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
(cd build && timeout 60 $K --gtest_filter='AttnDecodeGpu.*' > $out/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -cE "OK \]" $out/attn.log | sed 's/^/AttnDecodeGpu OK count /' >> $R
grep -E "FAILED|Failure" $out/attn.log | head -10 >> $R
for v in new old new2; do
  d=$root/build/kernels; [ $v = old ] && d=$root/build/kernels-old
  (cd build && KERN_KERNELS_DIR=$d timeout 50 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > /tmp/perf-$v.log 2>&1)
  echo "perf $v rc $? ($(el) s)" >> $R
  grep -E "us per layer" /tmp/perf-$v.log | grep -E "len 1024|grid 396" | head -8 | sed "s/^/$v /" >> $R
done
cp /tmp/perf-new.log /tmp/perf-old.log $out/ 2>/dev/null
timeout 60 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1; echo "synth rc $? ($(el) s)" >> $R
timeout 90 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool \
  --contexts 1024 --prefill 512 --batches 1,8,64,256 > $out/bench.txt 2>&1; echo "bench rc $? ($(el) s)" >> $R
sed -n '/^decode at batch B/,/^$/p' $out/bench.txt | head -7 >> $R
(cd build && timeout 60 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(el) s)" >> $R
grep -E "^\[tp\] [0-9]+ rows|Failure|OK \]|FAILED" $out/tp.log | head -8 >> $R
t=$(( limit - $(el) ))
if [ $t -gt 60 ]; then
  KERN_CTEST_ARGS="-E (PerfGpu\.|PerfGpuGemm\.Decode|TensorParallelGpu|AttnDecodeGpu)" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > /tmp/suite.out 2>&1
  echo "suite rc $? ($(el) s): $(tail -1 /tmp/suite.out)" >> $R
  grep -E "\*\*\*Failed|Timeout|\*\*\*Exception" $out/gpu-tests.log | head -10 >> $R
  grep -E "^ *[0-9]+/[0-9]+ Test" $out/gpu-tests.log | tail -1 >> $R
  grep -hE "^\[per-m\] step" build/Testing/Temporary/LastTest*.log >> $R
fi
cat $R
