#!/usr/bin/env bash
# The HF-transformers correctness gate for kern run (docs/run.md), on a GPU machine.
#
#   scripts/gate/run_gate.sh BUNDLE
#
# BUNDLE holds bin/kern, kernels/*.fatbin and tokenizer/tokenizer.json (+ tokenizer_config.json);
# scripts/gate/make_bundle.sh BUILD_DIR BUNDLE makes it from a build. For each shape in $SHAPES
# (default "tiny 4b 8b-l4": the tiny preset, the 4B preset, and an untied 8B shape cut to 4
# layers; also: hf-bf16, hf-fp32, hf-fp16, hf-yarn, checkpoints written by transformers' own
# save_pretrained (make_hf_checkpoint.py: sharded, random norm weights), and default, the trained
# default model of assets/default-model with its own tokenizer) it makes or copies a checkpoint,
# generates a manifest with logits exposed, runs
# `kern run --dump-logits` on every gate prompt (19 windows of natural text, 1..512 tokens) with
# $STEPS (32) decode steps, plus the determinism variants (--chunk 1, --eager, a repeat) on a
# few prompts; then hf_compare.py teacher-forces HF transformers (bf16, GPU) and compares.
# Work files go to $WORK (default /tmp/kern-gate); the JSON report and logs to $OUT. $GEN_ARGS adds
# kern gen flags (e.g. --decode-chain), $RUN_ARGS kern run flags: tensor parallelism is
# GEN_ARGS="--tp 2" RUN_ARGS="--gpus 0,1" (two ranks on one GPU: "--tp 2 --tp-peer-allreduce" and
# "--gpus 0,0"), and since the gate holds every shape's argmax to HF's wherever HF's margin exceeds
# 0.2 nat, a TP run that passes has the TP=1 run's tokens there (issue 20). Shape 8b is the whole
# untied 8B preset (36 layers, ~16 GB of weights).
# Exit 0 when the gate passes, 1 when it fails.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "${1:?usage: run_gate.sh BUNDLE}" && pwd)
WORK=${WORK:-/tmp/kern-gate}
OUT=${OUT:-$WORK/out}
SHAPES=${SHAPES:-"tiny 4b 8b-l4"}
STEPS=${STEPS:-32}
kern=$bundle/bin/kern
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$WORK" "$OUT"
export KERN_LOG=${KERN_LOG:-warn}

repo=$(cd "$here/../.." && pwd)
default_model=$repo/assets/default-model
# Prompts per tokenizer: Qwen3's for the synthesized and transformers-written shapes, the default
# model's own for `default`.
make_prompts() {  # tokenizer.json out.json
  python3 "$here/make_prompts.py" --kern "$kern" --tokenizer "$1" --corpus "$here/corpus.txt" -o "$2"
}
make_prompts "$bundle/tokenizer/tokenizer.json" "$WORK/prompts-qwen3.json" || exit 1
case " $SHAPES " in *" default "*) make_prompts "$default_model/tokenizer.json" "$WORK/prompts-default.json" || exit 1 ;; esac

runs=$WORK/runs.tsv
: > "$runs"
for shape in $SHAPES; do
  ckpt=$WORK/$shape
  prompts=$WORK/prompts-qwen3.json
  tokenizer=$bundle/tokenizer/tokenizer.json
  t0=$(date +%s%N)
  case $shape in
    tiny|4b|8b|8b-l4)
      case $shape in
        tiny) synth=(--preset tiny) ;;
        4b) synth=(--preset 4b) ;;
        8b) synth=(--preset 8b) ;;
        8b-l4) synth=(--preset 8b --layers 4) ;;
      esac
      make=("$kern" synth qwen3 "${synth[@]}" -o "$ckpt" --seed 7 --tokenizer-dir "$bundle/tokenizer" --force) ;;
    hf-bf16|hf-fp32|hf-fp16|hf-yarn)
      make=(python3 "$here/make_hf_checkpoint.py" --kind "${shape#hf-}" --out "$ckpt" --tokenizer-dir "$bundle/tokenizer") ;;
    default)
      prompts=$WORK/prompts-default.json
      tokenizer=$default_model/tokenizer.json
      make=(cp -r "$default_model" "$ckpt") ;;
    *) echo "unknown shape $shape"; exit 1 ;;
  esac
  rm -rf "$ckpt"
  "${make[@]}" 2> "$WORK/$shape-synth.log" > "$WORK/$shape-synth.out" ||
    { echo "$shape: making the checkpoint failed"; cat "$WORK/$shape-synth.log"; printf '%s\tsynth\t-\t-\t1\t-\n' "$shape" >> "$runs"; continue; }
  nprompts=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$prompts")
  # Determinism variants run on these prompt indices (short, mid, the 512-token one).
  variant_prompts=${VARIANT_PROMPTS:-"0 9 $((nprompts - 1))"}
  t1=$(date +%s%N)
  # shellcheck disable=SC2086  # GEN_ARGS: extra kern gen flags, word-split on purpose (e.g. --decode-chain)
  "$kern" gen qwen3 "$ckpt" -o "$WORK/$shape.json" --kernels-dir "$bundle/kernels" --logits-output ${GEN_ARGS:-} \
    2> "$WORK/$shape-gen.log" || { echo "$shape: gen failed"; cat "$WORK/$shape-gen.log"; printf '%s\tgen\t-\t-\t1\t-\n' "$shape" >> "$runs"; continue; }
  # MANIFEST_HOOK: a command given the manifest's path last, which may rewrite it in place (e.g.
  # scripts/capture/captured_silu_mul.py: captured kernels in place of kern's)
  if [ -n "${MANIFEST_HOOK:-}" ]; then
    eval "$MANIFEST_HOOK \"\$WORK/\$shape.json\"" >> "$WORK/$shape-gen.log" 2>&1 ||
      { echo "$shape: MANIFEST_HOOK failed"; tail -5 "$WORK/$shape-gen.log"; printf '%s\tgen\t-\t-\t1\t-\n' "$shape" >> "$runs"; continue; }
    echo "$shape: manifest rewritten by MANIFEST_HOOK: $(tail -1 "$WORK/$shape-gen.log" | cut -c1-160)"
  fi
  echo "$shape: synthesized in $(( (t1 - t0) / 1000000 )) ms, manifest $(stat -c %s "$WORK/$shape.json") bytes"
  mkdir -p "$WORK/$shape-runs"
  run_one() {  # prompt-index variant extra-args...
    local i=$1 variant=$2; shift 2
    local ids name dump log rc s0 s1
    name=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])]['name'])" "$prompts" "$i")
    ids=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))[int(sys.argv[2])]['ids'])))" "$prompts" "$i")
    dump=$WORK/$shape-runs/$name.$variant.npy
    log=$WORK/$shape-runs/$name.$variant.log
    s0=$(date +%s%N)
    # shellcheck disable=SC2086  # RUN_ARGS: extra kern run flags, word-split on purpose (e.g. --gpus 0,1)
    timeout "${RUN_TIMEOUT:-120}" "$kern" run --manifest "$WORK/$shape.json" --kernels "$bundle/kernels" --weights "$ckpt" \
      --tokenizer "$tokenizer" --prompt-ids "$ids" --steps "$STEPS" \
      --dump-logits "$dump" ${RUN_ARGS:-} "$@" > "$log.stdout" 2> "$log"
    rc=$?
    s1=$(date +%s%N)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$name" "$variant" "$dump" "$rc" "$(( (s1 - s0) / 1000000 ))" >> "$runs"
    if [ $rc -ne 0 ]; then echo "$shape $name $variant: kern run exit $rc"; tail -5 "$log"; fi
  }
  for ((i = 0; i < nprompts; i++)); do run_one "$i" main; done
  for i in $variant_prompts; do
    run_one "$i" chunk1 --chunk 1
    run_one "$i" eager --eager
    run_one "$i" repeat
  done
  # Keep one run's report (start-up report + summary) for the record.
  cp "$WORK/$shape-runs/p$(printf %02d $((nprompts - 1))).main.log" "$OUT/$shape-run-512.log" 2>/dev/null
  # Compare this shape now (the report grows shape by shape, so a cut-short run keeps what it has).
  python3 "$here/hf_compare.py" --work "$WORK" --runs "$runs" --report "$OUT/gate-report.json" --shape "$shape"
  if ! awk -F'\t' -v s="$shape" '$1 == s && $3 == "main" && $5 == 0 { ok = 1 } END { exit !ok }' "$runs"; then
    echo "$shape: no kern run succeeded; the remaining shapes are skipped"
    break
  fi
  rm -rf "$ckpt"  # disk: the next shape's checkpoint
done

python3 "$here/hf_compare.py" --work "$WORK" --runs "$runs" --report "$OUT/gate-report.json" --summary --expect "$SHAPES"
