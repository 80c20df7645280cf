#!/usr/bin/env bash
# Session 21, device round 6: the ServeGpu tests after their servers start through kern_server.py.
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/setup-tokenizer.log 2>&1
KERN_CTEST_ARGS="-R ServeGpu" timeout 200 bash scripts/gpu-tests.sh build $out/serve-ctest.log > /dev/null 2>&1
echo "rc $?" >> $out/serve-ctest.log
grep -h "\[prompt-logprobs\]\|\[host-tier\]\|\[serve-vs-run\]" build/Testing/Temporary/LastTest.log >> $out/serve-ctest.log 2>/dev/null
grep -E "Test +#|gpu suite|rc |\[" $out/serve-ctest.log
