#!/usr/bin/env bash
# Session 27, device round 4: the GPU test scripts after their shared harness (tests/gpu/gpu_checks.py)
# and the final tree's sampling kernels: kern test, fp8 end to end, kern capture, the sampling tests.
# Run (carry [".devrun"]): bash docs/measurements/s27-2026-12-06/s27d.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt
KERN_CTEST_ARGS="-R (KernTestGpu|Fp8Gpu|CaptureGpu|SampleGpu|KernelCatalogueGpu)" timeout 200 bash scripts/gpu-tests.sh build $out/gpu-tests.log > /dev/null 2>&1
echo "rc $?"; tail -1 $out/gpu-tests.log
grep -E "Test +#.*(Failed|Timeout)" $out/gpu-tests.log | head
