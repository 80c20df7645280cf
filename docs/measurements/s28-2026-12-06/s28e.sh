#!/usr/bin/env bash
# Session 28, device round 5: the wgmma prefill attention as kern gen's default (head_dim 128).
# The HF gate (tiny, default); the GPU tests of prefill attention, the catalogue, chunk invariance and
# the server; kern test of the wgmma manifest against the mma one; kern bench prefill on the 4B shape
# with and without --prefill-attn-mma (no peer: its figures are session 23's).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28e.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
SKIP_SUITE=1 GATE_TIMEOUT=150 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
grep -E "gate exit|PASS|FAIL" $out/check.log | tail -6
KERN_CTEST_ARGS="-R (AttentionPrefill|KernelCatalogueGpu|PipelineGpu|ServeGpu.Greedy|EagerAndGraph)" timeout 240 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $?"; tail -3 $out/suite.out
for a in "" --prefill-attn-mma; do
  $k gen qwen3 assets/default-model --kernels-dir $K --logits-output $a -o /tmp/def${a:-wgmma}.json > /dev/null 2>> $out/gen.err
done
timeout 120 $k test /tmp/defwgmma.json --reference /tmp/def--prefill-attn-mma.json --weights assets/default-model --kernels $K > $out/kt.txt 2> $out/kt.err
echo "kern test wgmma vs mma rc $?"; head -12 $out/kt.txt
$k synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1
for a in "" --prefill-attn-mma; do
  timeout 170 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048 8192 $a --json $out/bench${a:-wgmma}.json > $out/bench${a:-wgmma}.txt 2>&1
  echo "bench ${a:-wgmma} rc $?"; grep -iE "prefill|attn|ceiling|copy|decode" $out/bench${a:-wgmma}.txt | head -16
done
