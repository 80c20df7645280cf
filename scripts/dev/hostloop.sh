#!/usr/bin/env bash
# Dev round for the decode host loop (issue 5: end-to-end per token <= GPU step + 30 us).
# A 4-layer Qwen3-4B-shaped checkpoint is synthesized, then `kern bench` runs at contexts 128 and
# 32768 with KERN_BENCH_HOSTLOOP_DETAIL=1: per context one "hostloop" line on stderr with the GPU
# step (graph replays), the host step at exactly that context (kern bench's e2e figure), the
# continuous loop (context growing by one per token) and the phases of a step (write, launch,
# wait, read; median us), each minus the GPU step. When time is left, the same on all 36 layers
# (the ~400-node graph of the real shape). Must finish within 90 s.
# Usage: bash scripts/dev/hostloop.sh <build-dir> <out-dir>   (from the repo root)
. "$(dirname "$0")/common.sh"
dev_round hostloop /tmp/hostloop-out "$@"
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
  if [ "$layers" = 4 ]; then run_smoke "$model"; fi
  rm -rf "$model"
}

# kern run's generator (ranged writes, inputs written ahead, one wait per token) on the GPU: the
# graph run and the eager run must emit the same tokens; its decode ms/token line is printed.
run_smoke() {
  local model=$1
  echo "--- kern run smoke: graph vs eager, 200 steps"
  timeout 15 "$build/bin/kern" gen qwen3 "$model" -o "$model/manifest.json" --kernels-dir "$build/kernels" >/dev/null || {
    echo "kern gen failed"; return; }
  local ids=$(seq -s, 11 47)
  for mode in graph eager; do
    local flag=""; [ "$mode" = eager ] && flag="--eager"
    timeout 20 "$build/bin/kern" run --manifest "$model/manifest.json" --kernels "$build/kernels" --weights "$model" \
      --prompt-ids "$ids" --steps 200 --chunk 16 $flag >"$out/run-$mode.txt" 2>"$out/run-$mode.err"
    echo "run $mode rc=$?: $(grep -E 'decode .* ms/token' "$out/run-$mode.err" | tail -1)"
  done
  if cmp -s "$out/run-graph.txt" "$out/run-eager.txt"; then echo "kern run: graph and eager tokens identical ($(wc -c <"$out/run-graph.txt") bytes)"
  else echo "kern run: graph and eager tokens DIFFER"; head -c 400 "$out/run-graph.txt"; echo; head -c 400 "$out/run-eager.txt"; echo; tail -3 "$out/run-graph.err"; fi
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
