#!/usr/bin/env bash
# Session 23, device round 1: the race kernel's candidate lists (top-k / top-p / top-n log-probs in
# one pass over the GPU): the sampling GPU checks, the catalogue's ABI check, PerfGpu.Sample, the
# serve GPU tests (kern serve against kern run, sampled and greedy), then the strengthened PyTorch
# peer (docs/measurements/s23-2026-12-04/peer.sh).
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
T=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 150 $T --gtest_filter='SampleGpu*:KernelCatalogueGpu*' > $out/sample.log 2>&1; echo "sample rc $?" > $out/results.log
grep -E "^\[chi-square\]|FAILED|Failure|PASSED|Expected|Which is|route|row " $out/sample.log | head -120 >> $out/results.log
timeout 100 $T --gtest_filter='PerfGpu.Sample' > $out/perf-sample.log 2>&1; echo "perf rc $?" >> $out/results.log
grep -E "sample|argmax|copy" $out/perf-sample.log >> $out/results.log
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $?" >> $out/results.log
grep -E "^\[serve-gpu\]|OK \]|FAILED|Failure|PASSED" $out/serve-gpu.log | grep -v "first difference" >> $out/results.log
timeout 245 bash docs/measurements/s23-2026-12-04/peer.sh $out/peer > /dev/null 2>&1; echo "peer rc $?" >> $out/results.log
cat $out/peer/summary.txt >> $out/results.log 2>/dev/null
cat $out/results.log
