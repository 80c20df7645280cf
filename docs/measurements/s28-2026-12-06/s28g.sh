#!/usr/bin/env bash
# Session 28, device round 7: the rest of the GPU suite on the final tree (round 5 ran the prefill
# attention, catalogue, pipeline, eager/graph and greedy-serve tests; timings excluded).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28g.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
KERN_CTEST_ARGS="-E (AttentionPrefill|KernelCatalogueGpu|PipelineGpu|ServeGpu.Greedy|EagerAndGraph|PerfGpu)" timeout 500 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $?"; tail -2 $out/suite.out; grep -E "\*\*\*Failed|Timeout|Not Run" $out/suite.out | head
