#!/usr/bin/env bash
# Session 37, the last call: the used-range table now only from 33 sequences (kUsedTableFrom): the
# decode attention's tests, its timing against the kernel before the table (build/kernels-prev), then
# as much of the GPU suite's serving and runtime tests as the time left allows.
# Run (carry [".devrun"]): bash docs/measurements/s37-2026-12-07/s37e.sh $OUT [seconds, 200]
set -u
out=$1
limit=${2:-200}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( limit - ($(date +%s) - t0) )); }
R=$out/results.log
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
(cd build && timeout 60 $K --gtest_filter='AttnDecodeGpu.*' > $out/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -cE "OK \]" $out/attn.log | sed 's/^/AttnDecodeGpu OK count /' >> $R
grep -E "FAILED|Failure" $out/attn.log | head -10 >> $R
for v in new prev; do
  d=$root/build/kernels; [ $v = prev ] && d=$root/build/kernels-prev
  (cd build && KERN_KERNELS_DIR=$d timeout 50 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > /tmp/perf-$v.log 2>&1)
  echo "perf $v rc $? ($(el) s)" >> $R
  grep -E "us per layer" /tmp/perf-$v.log | grep -E "warp split 128.*(seqs (1|8) len 1024|seqs 64 len 1024|lens )" | sed "s/^/$v /" >> $R
done
t=$(left)
if [ $t -gt 40 ]; then
  KERN_CTEST_ARGS="-R (ServeGpu|TensorParallelGpu|PipelineGpu)" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > /tmp/suite.out 2>&1
  echo "suite subset rc $? ($(el) s): $(tail -1 /tmp/suite.out)" >> $R
  grep -E "\*\*\*Failed|Timeout|\*\*\*Exception" $out/gpu-tests.log | head -10 >> $R
  grep -E "^ *[0-9]+/[0-9]+ Test" $out/gpu-tests.log | tail -1 >> $R
fi
echo "total $(el) s" >> $R
cat $R
