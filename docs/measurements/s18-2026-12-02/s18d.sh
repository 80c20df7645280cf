#!/usr/bin/env bash
# Session 18, device round 4 (tree 37cf8db): the GPU test executables run directly (the packed ctest
# files named this machine's pyenv python and listed one test).
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
for t in tests/gpu/kernels/kern_kernels_gpu_test tests/gpu/kernels/kern_catalogue_gpu_test tests/gpu/runtime/test_runtime_gpu tests/gpu/runtime/test_weight_loader_gpu tests/gpu/serve/test_serve_gpu; do
  n=$(basename $t)
  (cd build/$(dirname $t) && timeout 200 ./$n --gtest_filter='-PerfGpu*:*Perf*' > $out/$n.log 2>&1); echo "$n rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "^\[  PASSED|^\[  FAILED|tests ran" $out/$n.log | head -12 >> $R
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
