#!/usr/bin/env bash
# Session 28, device round 6: kern bench prefill (and decode at 1k) on the 4B shape with the wgmma
# prefill attention (kern gen's default) and with --prefill-attn-mma, in one call (round 5 passed
# `--prefill 2048 8192`, which kern bench refuses: the list is comma-separated).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28f.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
$k synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1
for a in "" --prefill-attn-mma; do
  timeout 200 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048,8192 $a --json $out/bench${a:-wgmma}.json > $out/bench${a:-wgmma}.txt 2>&1
  echo "bench ${a:-wgmma} rc $?"; grep -iE "prefill|attn|ceiling|copy|decode" $out/bench${a:-wgmma}.txt | head -24
done
