#!/usr/bin/env bash
# Session 42, device call 3: the race kernel at 8 CTAs per SM (__launch_bounds__(256, 8): 32
# registers, a 12-byte spill; .devrun/var/b8) against the build's 6 (40 registers, no spill), with
# the inverse-CDF draw in both: PerfGpu.Sample interleaved, the sampling tests with b8, and kern run's
# seeded chat with each (the same bytes expected: only the register allocation differs).
# NOT RUN in session 42 (its device time ran out). The variant is built here first:
#   mkdir -p /tmp/kb8 .devrun/var/b8 && cp kernels/*.cuh kernels/sample.cu /tmp/kb8/ &&
#   sed -i 's/__launch_bounds__(kern_sample::kRaceThreads, 6)/__launch_bounds__(kern_sample::kRaceThreads, 8)/' /tmp/kb8/sample_race.cuh &&
#   nvcc -fatbin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 \
#     -gencode arch=compute_80,code=compute_80 -o .devrun/var/b8/sample.fatbin /tmp/kb8/sample.cu
# then bash scripts/dev/pack.sh build .devrun/pack.txz.
# Run (carry [".devrun"]): bash docs/measurements/s42-2026-12-07/s42b.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
for v in new b8 new b8; do
  d=/tmp/k-$v; rm -rf $d; mkdir -p $d; cp build/kernels/*.fatbin $d/; cp build/kernels/*.cubin $d/ 2>/dev/null
  [ $v = new ] || cp .devrun/var/$v/sample.fatbin $d/sample.fatbin
  (cd build && KERN_KERNELS_DIR=$d timeout 60 $K --gtest_filter='PerfGpu.Sample' > $L/perf-$v.log 2>&1); echo "perf $v rc $? ($(el) s)" >> $R
  grep -E "figure\] (sample op|sample race kernel alone|argmax op)" $L/perf-$v.log | sed "s/vocab 151936 us//; s/^/$v /" >> $R
done
(cd build && KERN_KERNELS_DIR=/tmp/k-b8 timeout 120 $K --gtest_filter='SampleGpu*:*SampleChiSquare*:KernelCatalogueGpu.*' > $L/sample-b8.log 2>&1); echo "b8 sample tests rc $? ($(el) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" $L/sample-b8.log >> $R
m=/tmp/dm; mkdir -p $m
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $m/
for v in new b8; do  # a manifest per kernels dir: it pins each module's sha256
  build/bin/kern gen qwen3 $m -o $m/manifest-$v.json --kernels-dir /tmp/k-$v > $L/gen-$v.log 2>&1; echo "gen $v rc $?" >> $R
  timeout 30 build/bin/kern run --manifest $m/manifest-$v.json --kernels /tmp/k-$v --weights $m --tokenizer $m/tokenizer.json \
    --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 > $L/chat-$v.txt 2> $L/chat-$v.err; echo "chat $v rc $?" >> $R
done
cmp $L/chat-new.txt $L/chat-b8.txt && echo "chat: b8 = new" >> $R
echo "done ($(el) s)" >> $R
cat $R
