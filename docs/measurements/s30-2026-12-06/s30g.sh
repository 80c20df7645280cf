#!/usr/bin/env bash
# Session 30, device round 7: the whole GPU suite (scripts/gpu-tests.sh) on the committed tree.
# Run (carry [".devrun"], full pack .devrun/pack.txz): bash docs/measurements/s30-2026-12-06/s30g.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
timeout 560 bash scripts/gpu-tests.sh build $out/gpu-tests.log > /dev/null 2>&1
echo "gpu-tests rc $?" > $out/results.log
grep -E "Failed|\*\*\*|Not Run|Timeout" $out/gpu-tests.log | head -20 >> $out/results.log
tail -3 $out/gpu-tests.log >> $out/results.log
cat $out/results.log
