#!/usr/bin/env bash
# Session 32, device round 3: kern run's first token from the prefill's own last row (issue 18; docs/perf.md,
# session 32). The HF gate on the default shape (its determinism variants: --chunk 1, --eager, a
# repeat), the GPU tests that drive kern run's Generator (serve against kern run, kern test, capture, fp8,
# pipeline), then kern bench on the 4B shape twice in one call: the new default and --first-token-step
# (the old way: positions [0, n - 1) in the prefill, the last through a one-row decode step); the peer once.
# First: tensor-parallel Qwen3 on one GPU (two ranks through the peer all-reduce against one rank; issue 20).
# Run (carry [".devrun"]): bash docs/measurements/s32-2026-12-06/s32c.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
R=$out/results.log
bash scripts/setup-tokenizer.sh > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
(cd build && timeout 90 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\]|Failure|Expected|Which is|exception|OK|FAILED" $out/tp.log | head -12 >> $R
t0=$(date +%s)
KERN_CTEST_ARGS="-R (TensorParallelGpu|PeerAllReduceGpu|KernelCatalogueGpu|PeerBarrierGpu|ServeGpu|PipelineGpu|CaptureGpu|Fp8Gpu|KernTestGpu)" timeout 120 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s)" >> $R; tail -1 $out/suite.out >> $R
grep -E "Failed|Timeout|\[tp\]" $out/suite.log | head -8 >> $R
$k synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
t0=$(date +%s)
timeout 100 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048,8192 --first-token-step --json $out/bench-step.json > $out/bench-step.txt 2>&1
echo "bench --first-token-step rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)" $out/bench-step.txt >> $R
t0=$(date +%s)
timeout 200 $k bench --weights /tmp/m4b --kernels $K --no-startup --no-pool --contexts 1024 --prefill 2048,8192 --json $out/bench.json > $out/bench.txt 2>&1
echo "bench default (with the peer) rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)" $out/bench.txt >> $R
grep -E "prefill|peer" $out/bench.txt | grep -v "^bench:" | head -30 >> $R
t0=$(date +%s)
SKIP_SUITE=1 GATE_TIMEOUT=150 timeout 160 bash scripts/dev/check.sh build $out/chk "default" > $out/gate.out 2>&1
echo "gate rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "gate exit|PASS|FAIL|mean|variant|identical" $out/gate.out | tail -12 >> $R
cat $R
