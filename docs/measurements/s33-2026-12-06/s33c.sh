#!/usr/bin/env bash
# Session 33, device round 2: after round 1 showed every barrier of a first call timing out (CUDA's lazy
# module loading: a library kernel's first launch waits for the GPU, where the other rank's barrier
# spins), the ranks now load with CUDA_MODULE_LOADING=EAGER (Runtime::prefer_eager_module_loading).
# The TP test (barrier errors now read after every call), kern run --gpus 0,0 against the one-rank
# manifest, then the GPU tests nearest the change (the device budget left: ~300 s).
# Run (carry [".devrun"]): bash docs/measurements/s33-2026-12-06/s33c.sh $OUT
set -u
out=$1
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
(cd build && timeout 90 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\]|Failure|Expected|Which is|exception|OK \]|FAILED" $out/tp.log | head -30 >> $R
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
$k synth qwen3 --preset tiny -o /tmp/tiny > /dev/null 2>&1; echo "synth rc $?" >> $R
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 -o /tmp/tp1.json 2> /dev/null
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 --tp 2 --tp-peer-allreduce -o /tmp/tp2.json 2> /dev/null
ids=$(python3 -c "import random;r=random.Random(5);print(','.join(str(r.randrange(100,150000)) for _ in range(300)))")
for v in 1 2; do
  g=0; [ $v = 2 ] && g=0,0
  KERN_NO_FABRIC=1 timeout 60 $k run --manifest /tmp/tp$v.json --kernels build/kernels --weights /tmp/tiny --prompt-ids $ids --steps 24 --gpus $g > $out/run-tp$v.txt 2> $out/run-tp$v.err
  echo "kern run tp$v rc $? ($(( $(date +%s) - t0 )) s): $(cat $out/run-tp$v.txt)" >> $R
  grep -E "ranks:|generated|warn|error" $out/run-tp$v.err >> $R
done
KERN_CTEST_ARGS="-R (TensorParallel|PeerAllReduce|PeerBarrier|HandshakeGpu|KernelCatalogueGpu)" timeout 90 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite subset rc $? ($(( $(date +%s) - t0 )) s)" >> $R; tail -1 $out/suite.out >> $R
grep -E "\*\*\*Failed|Timeout" $out/suite.log | head -8 >> $R
cat $R
