#!/usr/bin/env bash
# Session 15, device round 4: the CUDA shell's VMM layer (tests/gpu/runtime/vmm_test.cpp) and the
# runtime's whole GPU test binary with it.
set -u
out=$1
R=$out/results.log
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R
T=build/tests/gpu/runtime/test_runtime_gpu
timeout 60 $T --gtest_filter='Vmm*' > "$out/vmm.log" 2>&1; echo "vmm rc $?" >> $R
grep -E "^\[vmm\]|^\[  (PASSED|FAILED) |FAILED|Failure|Expected|Which|actual" "$out/vmm.log" | head -30 >> $R
(cd build && timeout 240 ./tests/gpu/runtime/test_runtime_gpu) > "$out/runtime.log" 2>&1; echo "runtime gpu rc $?" >> $R
grep -E "^\[  (PASSED|FAILED) |FAILED" "$out/runtime.log" | tail -8 >> $R
cat $R
