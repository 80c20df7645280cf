#!/usr/bin/env bash
# Session 31, device round 2 (short: the machine was taken back twice during round 1, which ran the
# whole suite): only the new tests, PoolShareGpu (a second process maps a Runtime's pool through
# POSIX fds) and HandshakeGpu (two ranks of one group in one process; their loads run the multimem
# scan of session 30 on the peer kernel's module), the VMM tests, the peer barrier kernel
# (PeerBarrierGpu, PerfGpu.PeerBarrier) and the catalogue's ABI check (the new peer family).
# Run (carry [".devrun"], full pack .devrun/pack.txz): bash docs/measurements/s31-2026-12-06/s31b.sh $OUT
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
(cd build && KERN_LOG=info timeout 150 tests/gpu/runtime/test_runtime_gpu --gtest_filter='PoolShareGpu*:HandshakeGpu*:Vmm*' > $out/new-tests.log 2>&1); echo "new tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  |pool-share\]|handshake\]|Failure|Expected|Which is|actual|error" $out/new-tests.log | head -40 >> $R
(cd build && timeout 60 tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PeerBarrierGpu*:PerfGpu.PeerBarrier' > $out/barrier.log 2>&1); echo "barrier rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  |peer-barrier\]|figure|Failure|Expected|Which is" $out/barrier.log | head -30 >> $R
(cd build && timeout 60 tests/gpu/kernels/kern_catalogue_gpu_test > $out/catalogue.log 2>&1); echo "catalogue rc $? ($(( $(date +%s) - t0 )) s)" >> $R
tail -3 $out/catalogue.log >> $R
# Where libnccl lives on the device (for the NCCL externs' dlopen).
{ echo "nccl:"; ldconfig -p | grep -i nccl; ls /usr/local/cuda/lib64 2>/dev/null | grep -i nccl;
  python3 -c "import nvidia.nccl, os; d=os.path.dirname(nvidia.nccl.__file__); print(d, os.listdir(os.path.join(d, 'lib')))" 2>&1 | tail -1; } >> $R
cat $R
