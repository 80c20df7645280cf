#!/usr/bin/env bash
# Session 24, device round 6: the ranking tail as a __noinline__ function (does the common path
# come back to 62 us at batch 64 for temperature rows?), the sampling tests, the capture GPU test.
set -u
out=$1
log=$out/round6.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
timeout 200 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='*SampleGpu*:*SampleChiSquare*' > /tmp/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/sample-tests.log | head -20
grep -B2 -A12 "Failure" /tmp/sample-tests.log | head -40
timeout 100 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/p.log 2>&1; echo "perf rc $?"
grep "figure\] sample op\|argmax op\|race kernel alone" /tmp/p.log | sed 's/vocab 151936 us//'
timeout 150 python3 tests/gpu/capture/capture_test.py $root/build/bin/kern $root/build/kernels $root/assets/default-model /tmp/capwork $root > $out/capture-test.txt 2>&1; echo "capture test rc $?"
grep -E "^(ok|FAIL)|capture test:|^kern capture|exit status|^error" $out/capture-test.txt | head -40
grep -A25 "^[0-9]* modules, " $out/capture-test.txt | head -30 | cut -c1-160
echo "== GEMM externs (after the fp8 alignment fix)"
CUBLASLT_LOG_LEVEL=1 timeout 200 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuGemm*:RuntimeGpuGraph*:RuntimeGpuFailures.UnsupportedExternIsRejectedAtLoad' > /tmp/ext.log 2>&1; echo "extern tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/ext.log | head -20
grep -B3 -A10 "Failure" /tmp/ext.log | head -50
grep "cublasLt\]\|\[cublasLt" /tmp/ext.log | head -10
