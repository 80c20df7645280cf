#!/usr/bin/env bash
# Session 31, device round 1: the new pool-share and handshake tests (a second process maps a Runtime's pool through
# POSIX fds), then the whole GPU suite on the tree (the load-time multimem hook of session 30 has not
# run on a GPU before). Run (carry [".devrun"], full pack .devrun/pack.txz):
#   bash docs/measurements/s31-2026-12-06/s31a.sh $OUT
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
(cd build && timeout 120 tests/gpu/runtime/test_runtime_gpu --gtest_filter='PoolShareGpu*:HandshakeGpu*:Vmm*' > $out/pool-share.log 2>&1); echo "pool-share rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  |pool-share\]|handshake\]|Failure|error|Expected|Which is|actual" $out/pool-share.log | head -30 >> $R
timeout $(( 570 - ($(date +%s) - t0) )) bash scripts/gpu-tests.sh build $out/gpu-tests.log > /dev/null 2>&1
echo "gpu-tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "Failed|\*\*\*|Not Run|Timeout" $out/gpu-tests.log | head -20 >> $R
tail -3 $out/gpu-tests.log >> $R
cat $R
