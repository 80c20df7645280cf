#!/usr/bin/env bash
# Dev round for the decode host loop (issue 5: end-to-end per token <= GPU step + 30 us).
# A 4-layer Qwen3-4B-shaped checkpoint is synthesized, then `kern bench` runs at contexts 128 and
# 32768 with KERN_BENCH_HOSTLOOP_DETAIL=1: per context one "hostloop" line on stderr with the GPU
# step (graph replays), the host step at exactly that context (kern bench's e2e figure), the
# continuous loop (context growing by one per token) and the phases of a step (write, launch,
# wait, read; median us), each minus the GPU step. When time is left, the same on all 36 layers
# (the ~400-node graph of the real shape). Must finish within 90 s.
# Usage: bash scripts/dev/hostloop.sh <build-dir> <out-dir>   (from the repo root)
set -uo pipefail
build=${1:-build}
out=${2:-/tmp/hostloop-out}
mkdir -p "$out"
log="$out/hostloop.log"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

bench_shape() {  # layers, seconds allowed in all, replays
  local layers=$1 budget=$2 replays=$3 model=/tmp/hl-model-$1
  rm -rf "$model"
  echo "--- synth qwen3 --preset 4b --layers $layers"
  local ts=$(date +%s)
  timeout "$budget" "$build/bin/kern" synth qwen3 --preset 4b --layers "$layers" -o "$model" --no-tokenizer >/dev/null
  echo "synth rc=$? in $(( $(date +%s) - ts )) s; $(du -sh "$model" 2>/dev/null | cut -f1)"
  local left=$(( budget - ($(date +%s) - ts) ))
  if [ "$left" -lt 8 ]; then echo "skipped: ${left} s left"; rm -rf "$model"; return; fi
  echo "--- kern bench, $layers layers, contexts 128,32768, $replays replays (timeout ${left} s)"
  KERN_BENCH_HOSTLOOP_DETAIL=1 timeout "$left" "$build/bin/kern" bench --weights "$model" --kernels "$build/kernels" \
    --no-peer --no-startup --contexts 128,32768 --prefill 16 --replays "$replays" --copy-mib 256 --gemm 1024 \
    --json "$out/hostloop-$layers.json"
  echo "bench rc=$? at $(elapsed) s"
  rm -rf "$model"
}

main() {
  echo "hostloop.sh: $(date -u) on $(hostname); build $build; commit $(git rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv 2>&1 | head -3
  nproc
  bench_shape 4 40 200
  # The real shape when there is time: its graph has ~10x the nodes (launch cost per node).
  local left=$(( 86 - $(elapsed) ))
  if [ "$left" -ge 40 ]; then bench_shape 36 "$left" 100; else echo "36 layers skipped: ${left} s left"; fi
  echo "hostloop.sh: done in $(elapsed) s"
}
main 2>&1 | tee "$log"
