#!/usr/bin/env bash
# Session 24, device round 5: the v2 race kernel with its ranking tail compiled out (ranking rows
# to the cluster kernel): does the temperature rows' batch-64 time come back to v1's 63 us?
set -u
out=$1
log=$out/round5.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P)
for v in .devrun/var/na build/kernels; do
  echo "== $v"
  KERN_KERNELS_DIR=$root/$v timeout 100 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/p.log 2>&1; echo "rc $?"
  grep "figure\] sample op greedy batch\|figure\] sample op temperature 0.8 batch\|figure\] sample op min-p" /tmp/p.log | sed 's/vocab 151936 us//'
done
