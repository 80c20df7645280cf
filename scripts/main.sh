#!/usr/bin/env bash
# The main job. Builds kern; on a machine with an NVIDIA GPU it synthesizes the default
# model (a random-weight Qwen3 checkpoint), generates its manifest and generates text; on a
# machine without one it says so and verifies the example manifests instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/build.sh
kern=${KERN_BUILD_DIR:-build}/bin/kern

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi

if [ "$has_gpu" = 0 ]; then
  echo "main: no NVIDIA GPU on this machine: kern is built ($kern) but cannot generate text here." >&2
  echo "main: verifying the example manifests instead." >&2
  for m in examples/*.json; do
    "$kern" verify "$m"
  done
  exit 0
fi

if ! "$kern" run --help >/dev/null 2>&1; then
  echo "main: this build has no 'kern run' yet; verifying the example manifests." >&2
  for m in examples/*.json; do "$kern" verify "$m"; done
  exit 0
fi

model=${KERN_MODEL_DIR:-models/default}
if [ ! -f "$model/config.json" ]; then
  "$kern" synth qwen3 --preset "${KERN_PRESET:-0.6b}" -o "$model"
fi
"$kern" gen qwen3 "$model" -o "$model/manifest.json" --kernels-dir "${KERN_BUILD_DIR:-build}/kernels"
"$kern" run --manifest "$model/manifest.json" --kernels "${KERN_BUILD_DIR:-build}/kernels" \
  --weights "$model" --tokenizer "$model/tokenizer.json" \
  --prompt "${KERN_PROMPT:-The capital of France is}" --steps "${KERN_STEPS:-32}"
