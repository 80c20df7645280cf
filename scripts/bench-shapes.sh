#!/usr/bin/env bash
# kern bench, with the PyTorch peer, on the three shapes issue 18 names (Qwen3-0.6B, 4B and 8B; random
# bf16 weights from kern synth, made once under OUT_DIR), each report against its own shape's targets
# (docs/perf.md, "Targets"). On a GPU machine, from the repository root, after a build:
#   scripts/bench-shapes.sh OUT_DIR [kern bench options, e.g. --contexts 1024 --prefill 2048 --no-startup]
# Writes OUT_DIR/<shape>.txt and OUT_DIR/<shape>.json and prints every shape's decode and prefill lines
# and targets. KERN_BENCH_SHAPES overrides the list (comma-separated presets); KERN_BIN the binary.
set -uo pipefail
out=${1:?usage: scripts/bench-shapes.sh OUT_DIR [kern bench options]}
shift
kern=${KERN_BIN:-build/bin/kern}
[ -x "$kern" ] || { echo "bench-shapes: no kern binary at $kern (build first, or set KERN_BIN)" >&2; exit 2; }
mkdir -p "$out"
status=0
IFS=, read -r -a shapes <<< "${KERN_BENCH_SHAPES:-0.6b,4b,8b}"
for shape in "${shapes[@]}"; do
  dir=$out/m-$shape
  if [ ! -f "$dir/config.json" ]; then
    "$kern" synth qwen3 --preset "$shape" -o "$dir" >&2 || { echo "bench-shapes: kern synth $shape failed" >&2; status=1; continue; }
  fi
  if ! "$kern" bench --weights "$dir" --json "$out/$shape.json" "$@" > "$out/$shape.txt"; then
    echo "bench-shapes: kern bench on $shape failed (its output: $out/$shape.txt)" >&2
    status=1
    continue
  fi
  echo "== $shape"
  sed -n '/^decode (batch 1/,/^$/p;/^prefill (time to the first token/,/^$/p;/^targets/,/^$/p' "$out/$shape.txt"
done
exit $status
