#!/usr/bin/env bash
# Session 27, device round 1: the whole GPU suite on the tree that lands session 26's work (kern test,
# load_over, the compare kernels' first run, the quant kernels, kern gen --fp8, the externs again).
# Run (carry [".devrun"]): bash docs/measurements/s27-2026-12-06/s27a.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt
timeout 545 bash scripts/gpu-tests.sh build $out/gpu-tests.log > /dev/null 2>&1
echo "suite rc $?"
tail -2 $out/gpu-tests.log
grep -E "^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|Not Run)" $out/gpu-tests.log | head -20
grep -E "^(ok|FAIL) " $out/gpu-tests.log | head -40
grep -E "rel(ative)? (Frobenius )?err" $out/gpu-tests.log | head -20
gzip -k $out/gpu-tests.log
