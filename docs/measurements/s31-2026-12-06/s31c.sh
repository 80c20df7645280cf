#!/usr/bin/env bash
# Session 31, for the next device call (not run in session 31: no device time left): PoolShareGpu and
# HandshakeGpu again after round 1's fixes, and RuntimeGpuNccl (written after round 1). Round 1's fixes: a kv state
# larger than one 64 MiB chunk; the barrier program without graph, which R9 allows only with batch).
# Run (carry [".devrun"], full pack .devrun/pack.txz): bash docs/measurements/s31-2026-12-06/s31c.sh $OUT
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
(cd build && KERN_LOG=info timeout 150 tests/gpu/runtime/test_runtime_gpu --gtest_filter='PoolShareGpu*:HandshakeGpu*:RuntimeGpuNccl*' > $out/new-tests.log 2>&1); echo "new tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  |pool-share\]|pool_share_peer|handshake\]|Failure|Expected|Which is|actual|exception" $out/new-tests.log | head -40 >> $R
cat $R
