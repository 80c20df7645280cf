#!/usr/bin/env bash
# Session 24, device round 4: why temperature rows at batch 64 slowed with the threshold ranking v2
# (63 -> 88 us): PerfGpu.Sample on four builds of kernels/sample.cu in one call: the committed v2
# (launch bounds 256, 6: 40 registers), v1 (chunk pairs, 19 KB), v2 at (256, 5) (48 registers) and
# at (256, 4) (64 registers, no spills).
set -u
out=$1
log=$out/round4.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
for v in build/kernels .devrun/var/v1 .devrun/var/l5 .devrun/var/l4; do
  echo "== $v"
  KERN_KERNELS_DIR=$root/$v timeout 100 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/p.log 2>&1; echo "rc $?"
  grep "figure\] sample op\|argmax op" /tmp/p.log | sed 's/vocab 151936 us//'
done
