#!/usr/bin/env bash
# Session 42, device call 1: the race kernel's inverse-CDF draw for rows sampled over every token
# (issue 15 at batch 64; docs/perf.md, session 42). The sampling tests and every chi-square case with
# the new kernels, then PerfGpu.Sample with, interleaved: the session-41 sample.fatbin ("old",
# .devrun/var/old); the inverse CDF ("cdf", .devrun/var/cdf); that with the logits load issued before
# the row's parameters are read (as built, "new"); "cdf" with cdf_draw __noinline__ ("noinl",
# .devrun/var/noinl). Then kern run on the default model (greedy; --chat --temperature 0.7 --seed 1
# twice, eager, seed 2).
# Run (carry [".devrun"], after bash scripts/dev/pack.sh build .devrun/pack.txz):
#   bash docs/measurements/s42-2026-12-07/s42a.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
(cd build && timeout 200 $K --gtest_filter='SampleGpu*:*SampleChiSquare*:ArgmaxGpu*:KernelCatalogueGpu.*' > $L/sample.log 2>&1); echo "sample tests rc $? ($(el) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" $L/sample.log >> $R
grep -E "^\[chi-square\]" $L/sample.log >> $R
for v in old cdf new noinl old cdf new; do
  d=/tmp/k-$v; rm -rf $d; mkdir -p $d; cp build/kernels/*.fatbin $d/; cp build/kernels/*.cubin $d/ 2>/dev/null
  [ $v = new ] || cp .devrun/var/$v/sample.fatbin $d/sample.fatbin
  (cd build && KERN_KERNELS_DIR=$d timeout 60 $K --gtest_filter='PerfGpu.Sample' > $L/perf-$v.log 2>&1); echo "perf $v rc $? ($(el) s)" >> $R
  grep -E "figure\] (sample op|sample race kernel alone|argmax op|logits D2D)" $L/perf-$v.log | sed "s/vocab 151936 us//; s/^/$v /" >> $R
done
m=/tmp/dm; mkdir -p $m /tmp/runs
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $m/
build/bin/kern gen qwen3 $m -o $m/manifest.json --kernels-dir build/kernels > $L/gen.log 2>&1; echo "gen rc $?" >> $R
run() { timeout 30 build/bin/kern run --manifest $m/manifest.json --kernels build/kernels --weights $m --tokenizer $m/tokenizer.json "$@"; }
run --prompt "The capital of France is" --steps 40 > $L/greedy.txt 2> $L/greedy.err; echo "greedy rc $?" >> $R
for i in 1 2; do run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 > $L/chat$i.txt 2> $L/chat$i.err; echo "chat$i rc $?" >> $R; done
cmp $L/chat1.txt $L/chat2.txt && echo "chat: same text twice" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 --eager > $L/chat-eager.txt 2> $L/chat-eager.err
cmp $L/chat1.txt $L/chat-eager.txt && echo "chat: eager = graph" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 2 --steps 60 > $L/chat-seed2.txt 2> $L/chat-seed2.err
cmp -s $L/chat1.txt $L/chat-seed2.txt || echo "chat: seed 2 differs" >> $R
echo "--- chat1:" >> $R; head -c 600 $L/chat1.txt >> $R; echo >> $R
echo "done ($(el) s)" >> $R
cat $R
