#!/usr/bin/env bash
# Session 23: the PyTorch peer (bench/torch_peer.py), --variant legacy (the earlier peer, op for op)
# against --variant fast (fused F.rms_norm, q/k norm + RoPE together from static tables, one K/V
# cache copy, residual adds in the GEMMs, a lower-right causal bias for later prefill chunks).
# Qwen3-4B shape: decode at 1k and 32k, prefill 2048 and 8192 (whole prompt and chunks of 512),
# both variants, then fast with cuDNN attention first; 0.6B and 8B shapes: decode at 1k, fast only.
# A --check run first compares the variants' logits (4B shape cut to 4 layers).
# Needs python3 with torch and a CUDA GPU; no kern build (the peer reads only config.json, written
# here by hand with the presets' numbers: src/models/qwen3/shape.cpp).
# Usage, from anywhere: bash docs/measurements/s23-2026-12-04/peer.sh [OUTDIR]  (default $OUT)
# Writes OUTDIR/results.log (what ran, rc, seconds, the summary), OUTDIR/<run>.log and <run>.json,
# OUTDIR/summary.txt. About 1.5-2 minutes on an H200; every run is under `timeout`, and the whole
# script keeps to ~235 s (a run that would not fit is skipped, said so in results.log).
set -u
out=${1:-${OUT:-}}
[ -n "$out" ] || { echo "usage: $0 OUTDIR (or set OUT)" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd -P)
cd "$(dirname "$0")/../../.." || exit 2
t0=$(date +%s)
R=$out/results.log
cfg=$out/configs
mkdir -p "$cfg"
PEER=bench/torch_peer.py
BUDGET=235

say() { echo "$*" | tee -a "$R"; }
elapsed() { echo $(( $(date +%s) - t0 )); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2 >> "$R"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available())" >> "$R" 2>&1
say "peer: $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git status --short $PEER 2>/dev/null | head -1)"

python3 - "$cfg" <<'EOF'
import json, sys
base = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=128, vocab_size=151936,
            rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=40960, torch_dtype="bfloat16",
            hidden_act="silu", attention_bias=False)
shapes = {
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, tie_word_embeddings=True),
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, tie_word_embeddings=False),
}
shapes["4b-l4"] = dict(shapes["4b"], num_hidden_layers=4)
for name, s in shapes.items():
    with open(f"{sys.argv[1]}/{name}.json", "w") as f:
        json.dump(dict(base, **s), f, indent=2)
EOF

# run NAME TIMEOUT ARGS...: the peer with ARGS, log to OUTDIR/NAME.log, JSON to OUTDIR/NAME.json.
run() {
  local name=$1 tmo=$2
  shift 2
  local left=$(( BUDGET - $(elapsed) ))
  [ "$tmo" -gt "$left" ] && tmo=$left
  if [ "$tmo" -lt 25 ]; then
    say "$name: skipped ($(elapsed) s used of $BUDGET)"
    return
  fi
  local s
  s=$(date +%s)
  timeout "$tmo" python3 $PEER "$@" > "$out/$name.log" 2>&1
  local rc=$?
  say "$name: rc $rc in $(( $(date +%s) - s )) s (limit $tmo; at $(elapsed) s): $*"
  [ $rc -ne 0 ] && tail -5 "$out/$name.log" | sed 's/^/    /' | tee -a "$R"
}

# shellcheck disable=SC2054  # the commas are the peer's list syntax
C4=(--contexts 1024,32768 --prefill 2048,8192 --chunk 512 --replays 200 --reps 5)
run check 60 --config "$cfg/4b-l4.json" --check
grep "torch_peer: check" "$out/check.log" | tee -a "$R"
run peer-4b-fast 75 --config "$cfg/4b.json" --variant fast "${C4[@]}" --json "$out/peer-4b-fast.json"
run peer-4b-legacy 90 --config "$cfg/4b.json" --variant legacy "${C4[@]}" --json "$out/peer-4b-legacy.json"
run peer-0.6b-fast 40 --config "$cfg/0.6b.json" --variant fast --contexts 1024 --prefill 512 --json "$out/peer-0.6b-fast.json"
run peer-8b-fast 50 --config "$cfg/8b.json" --variant fast --contexts 1024 --prefill 512 --json "$out/peer-8b-fast.json"
run peer-4b-fast-cudnn 60 --config "$cfg/4b.json" --variant fast --sdpa cudnn "${C4[@]}" --json "$out/peer-4b-fast-cudnn.json"

python3 - "$out" <<'EOF' | tee "$out/summary.txt" | tee -a "$R"
import glob, json, os, sys
out = sys.argv[1]
runs = {}
for p in sorted(glob.glob(f"{out}/peer-*.json")):
    try:
        runs[os.path.basename(p)[5:-5]] = json.load(open(p))
    except (OSError, ValueError) as e:
        print(f"{p}: {e}")
if not runs:
    print("no peer JSON")
    sys.exit(0)
first = next(iter(runs.values()))
print(f"{first.get('device')}, torch {first.get('torch')}")
print("| run | decode ctx | GPU step us | e2e us |")
print("|---|---|---|---|")
for name, r in runs.items():
    for d in r["decode"]:
        print(f"| {name} | {d['context']} | {d['gpu_step_us']:.1f} | {d['e2e_us']:.1f} |")
print()
print("| run | prefill tokens | chunk | ms | tok/s |")
print("|---|---|---|---|---|")
for name, r in runs.items():
    for d in r["prefill"]:
        print(f"| {name} | {d['tokens']} | {d['chunk']} | {d['ms']:.1f} | {d['tokens_per_s']:,.0f} |")
fast, legacy = runs.get("4b-fast"), runs.get("4b-legacy")
if fast and legacy:
    print()
    print("4b legacy / fast (> 1: fast is faster):")
    for a, b in zip(legacy["decode"], fast["decode"]):
        print(f"  decode {a['context']}: {a['gpu_step_us']:.1f} / {b['gpu_step_us']:.1f} us = {a['gpu_step_us'] / b['gpu_step_us']:.3f}")
    for a, b in zip(legacy["prefill"], fast["prefill"]):
        print(f"  prefill {a['tokens']} chunk {a['chunk']}: {a['ms']:.1f} / {b['ms']:.1f} ms = {a['ms'] / b['ms']:.3f}")
EOF
say "total $(elapsed) s"
