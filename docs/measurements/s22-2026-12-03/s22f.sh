#!/usr/bin/env bash
# Session 22, device round 6: the engine GPU tests after the review (the mixed runner validates its
# var table before writing inputs; the engine takes the plan's mixed part as the scheduler marks it).
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $?" > $out/results.log
grep -E "^\[serve-gpu\]|OK \]|FAILED|Failure|PASSED" $out/serve-gpu.log | grep -v "first difference" >> $out/results.log
cat $out/results.log
