#!/usr/bin/env bash
# Session 18, device round 3 (tree 37cf8db): the whole GPU suite and the HF gate.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
rm -rf /tmp/chk /tmp/kern-gate
SUITE_TIMEOUT=300 GATE_TIMEOUT=150 timeout 500 bash scripts/dev/check.sh build /tmp/chk "tiny default" > /tmp/runs/check.out 2>&1
cp /tmp/chk/gpu-tests.log "$out/gpu-tests.log"; grep -E "gpu suite|gate|PASS|FAIL|positions|argmax" /tmp/runs/check.out | tail -14 >> $R
grep -E "serve-gpu\]|serve-vs-run\]" /tmp/chk/gpu-tests.log | head -12 >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
