#!/usr/bin/env bash
# Session 38, device call 2: the decode attention's merge in the last range (kern_attn_decode_{mma,warp}_
# merge_partial_hd*): its correctness tests, its timing beside the partial + reduce pair in one binary,
# kern bench (4B) with and without it (--no-attn-merge) at batch 1 (1k, 32k) and through the serving runner
# at 1 and 64, and the serving GPU tests on manifests that now merge by default.
# Run (carry [".devrun"]): bash docs/measurements/s38-2026-12-07/s38b.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
[ -x build/bin/kern ] || tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
(cd build && timeout 200 $K --gtest_filter='AttnDecodeGpu.*' > $L/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -E "^\[  PASSED|^\[  FAILED|tests ran" $L/attn.log >> $R
(cd build && timeout 120 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > $L/perf.log 2>&1); echo "perf rc $? ($(el) s)" >> $R
grep -E "(mma|warp|mma_merge|warp_merge) split (256|128) grid (units\*8\+256|396) .*us per layer" $L/perf.log | sed 's/\[figure\] decode length-only //' >> $R
grep -E "partial-only" $L/perf.log | sed 's/\[figure\] decode length-only //' >> $R
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R
bench() {  # bench NAME ARGS...
  timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool \
    --contexts 1024,32768 --prefill 2048 --replays 50 --batches 1,64 --json $L/$1.json "${@:2}" > $L/$1.txt 2> $L/$1.err
  echo "bench $1 rc $? ($(el) s)" >> $R
  grep -E "^ +(1024|32768) " $L/$1.txt | head -2 | sed "s/^/$1 decode /" >> $R
  grep -E "batched decode at" $L/$1.err | sed "s/^/$1 /" >> $R
  grep -E "attn_decode" $L/$1.txt | head -2 | sed "s/^/$1 op /" >> $R
}
bench merge
bench nomerge --no-attn-merge

KERN_CTEST_ARGS="-R (ServeGpu|PipelineGpu|TensorParallelGpu|RuntimeGpuGraph|KernTestGpu)" timeout 200 scripts/gpu-tests.sh build $L/serve-tests.log > /dev/null 2>&1
echo "serve tests rc $? ($(el) s)" >> $R
grep -E "Failed|\*\*\*" $L/serve-tests.log | head -5 >> $R
tail -1 $L/serve-tests.log >> $R
echo "total $(el) s" >> $R
cat $R
