#!/usr/bin/env bash
# Session 23, device round 8 (what the budget left after two calls lost to a reclaimed machine): the
# end-to-end GPU tests that run kern gen's manifests through the sampling op (ServeGpu, PipelineGpu,
# the catalogue's ABI check) and the HF gate on the tiny shape, on the final tree.
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
KERN_CTEST_ARGS="-R (ServeGpu|PipelineGpu|KernelCatalogueGpu|EagerAndGraph)" timeout 120 bash scripts/gpu-tests.sh build $out/gpu-tests.log > /dev/null 2>&1; echo "subset rc $?"
tail -4 $out/gpu-tests.log
SKIP_SUITE=1 GATE_TIMEOUT=80 timeout 95 bash scripts/dev/check.sh build $out/chk "tiny" > $out/check.log 2>&1
cat $out/check.log | tail -12
