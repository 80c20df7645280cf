#!/usr/bin/env bash
# Session 24, device round 7: the ranking tail as a kernel of its own (kern_sample_rank_bf16, one
# CTA per row, between the race and the cluster kernel): sampling tests, catalogue, PerfGpu.Sample.
set -u
out=$1
log=$out/round7.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
timeout 200 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='*SampleGpu*:*SampleChiSquare*' > /tmp/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/sample-tests.log | head -20
grep -B2 -A12 "Failure" /tmp/sample-tests.log | head -40
timeout 60 build/tests/gpu/kernels/kern_catalogue_gpu_test > /tmp/catalogue.log 2>&1; echo "catalogue rc $?"; tail -1 /tmp/catalogue.log
timeout 100 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/p.log 2>&1; echo "perf rc $?"
grep "figure\] sample op\|argmax op\|race kernel alone" /tmp/p.log | sed 's/vocab 151936 us//'
