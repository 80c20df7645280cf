#!/usr/bin/env bash
# The main job. Builds kern; on a machine with an NVIDIA GPU it takes the default model (a small
# Qwen3 trained on English, assets/default-model), generates its manifest and generates text; on a
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

# The default model: a 7.9M-parameter Qwen3 trained on the Brown Corpus (assets/default-model,
# its README says how), copied to a scratch folder because kern gen writes the manifest beside it.
# KERN_PRESET=0.6b (or 4b, ...) runs a random-weight checkpoint of that real Qwen3 shape instead.
model=${KERN_MODEL_DIR:-models/default}
if [ ! -f "$model/config.json" ]; then
  mkdir -p "$model"
  if [ -n "${KERN_PRESET:-}" ]; then
    "$kern" synth qwen3 --preset "$KERN_PRESET" -o "$model" --force
  else
    cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} "$model/"
  fi
fi
"$kern" gen qwen3 "$model" -o "$model/manifest.json" --kernels-dir "${KERN_BUILD_DIR:-build}/kernels"
"$kern" run --manifest "$model/manifest.json" --kernels "${KERN_BUILD_DIR:-build}/kernels" \
  --weights "$model" --tokenizer "$model/tokenizer.json" \
  --prompt "${KERN_PROMPT:-The capital of France is}" --steps "${KERN_STEPS:-40}"
