#!/usr/bin/env bash
# Session 32, device round 4, after round 3's three failures were fixed (the TP test's max_tokens 256 hit a
# RoPE launch `when` outside the var's bounds; the serve engine tests' reference generator now takes the
# first token from a one-row step, the server's way; kern bench's per-op prefill profile leased while the
# unprofiled generator still held its pages): the TP test, the serve engine tests, then kern bench on the
# 4B shape with the peer (the new default; round 3 has --first-token-step).
# Run (carry [".devrun"]): bash docs/measurements/s32-2026-12-06/s32d.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
(cd build && timeout 90 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\]|Failure|Expected|Which is|exception|OK|FAILED" $out/tp.log | head -12 >> $R
t0=$(date +%s)
KERN_CTEST_ARGS="-R (TensorParallelGpu|PeerAllReduceGpu|ServeGpu.GreedyTokens|ServeGpu.Seeded|ServeGpu.Mixed|ServeGpu.Packed)" timeout 80 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s)" >> $R; tail -1 $out/suite.out >> $R
grep -E "Failed|Timeout" $out/suite.log | head -8 >> $R
$k synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
t0=$(date +%s)
timeout 240 $k bench --weights /tmp/m4b --kernels $K --no-startup --no-pool --contexts 1024 --prefill 2048,8192 --json $out/bench.json > $out/bench.txt 2>&1
echo "bench default (with the peer) rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)" $out/bench.txt >> $R
grep -E "prefill|peer|gemm_lm|decode_lm|sample" $out/bench.txt | grep -v "^bench:" | head -40 >> $R
cat $R
