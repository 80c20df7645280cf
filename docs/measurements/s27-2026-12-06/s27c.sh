#!/usr/bin/env bash
# Session 27, device round 3: the sampling op's race kernel one warp per chunk (issue 15's "a few us").
# Correctness: every sampling test (chi-square through the op, bitwise across batch positions), the
# catalogue's ABI check, kern serve's sampled / penalized tokens alone and among 63 others.
# Speed: PerfGpu.Sample for the new kernel ((128, 7) launch bounds), the (128, 8) variant (same test
# binary, KERN_KERNELS_DIR), and the committed kernel (its own test binary and fatbins: the baseline).
# Run (carry [".devrun"]): bash docs/measurements/s27-2026-12-06/s27c.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt
export KERN_KERNELS_DIR=$root/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 200 $t --gtest_filter='*SampleGpu*:*SampleChiSquare*' > $out/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $out/sample-tests.log | head -20
grep -B2 -A12 "Failure" $out/sample-tests.log | head -40
perf() {  # label, binary, kernels dir
  KERN_KERNELS_DIR=$3 timeout 110 $2 --gtest_filter='PerfGpu.Sample' > $out/perf-$1.log 2>&1; echo "perf $1 rc $?"
  grep "figure\] sample op\|argmax op" $out/perf-$1.log | sed 's/^.*figure\] //'
}
perf new $t $root/build/kernels
xz -dk .devrun/old/kern_kernels_gpu_test.xz; chmod +x .devrun/old/kern_kernels_gpu_test
perf old .devrun/old/kern_kernels_gpu_test $root/.devrun/old/kernels
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
timeout 150 build/tests/gpu/serve/test_serve_gpu --gtest_filter='ServeGpu.Seeded*:ServeGpu.Greedy*' > $out/serve.log 2>&1; echo "serve rc $? $(tail -1 $out/serve.log)"
timeout 60 build/tests/gpu/kernels/kern_catalogue_gpu_test > $out/catalogue.log 2>&1; echo "catalogue rc $?"; tail -1 $out/catalogue.log
perf v8 $t $root/.devrun/v8/kernels
