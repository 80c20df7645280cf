#!/usr/bin/env bash
# Session 35, a last short device round (~200 s): session 33's lazy-loading fix (the TP=2-on-one-GPU test,
# kern run --gpus 0,0 against the one-rank manifest), algo_per_m's GPU tests (rows bitwise, what runs at
# each m and its time), then the serving tests with the time left.
# Run (carry [".devrun"]): bash docs/measurements/s35-2026-12-07/s35d.sh $OUT [seconds, 200]
set -u
out=$1
limit=${2:-200}
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - t0) )); }
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
(cd build && timeout 45 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\] [0-9]+ rows|Failure|Expected|Which is|exception|OK \]|FAILED|warn" $out/tp.log | head -20 >> $R
(cd build && timeout 90 tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuGemmInvariance.*:PerfGpuGemm.PerMEquivalentAnswers' > $out/gemm-per-m.log 2>&1)
echo "per-m rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[per-m\]|OK \]|FAILED|Failure" $out/gemm-per-m.log >> $R
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
$k synth qwen3 --preset tiny -o /tmp/tiny > /dev/null 2>&1
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 --tp 2 --tp-peer-allreduce -o /tmp/tp2.json 2> /dev/null
ids=$(python3 -c "import random;r=random.Random(5);print(','.join(str(r.randrange(100,150000)) for _ in range(300)))")
KERN_NO_FABRIC=1 timeout 30 $k run --manifest /tmp/tp2.json --kernels build/kernels --weights /tmp/tiny --prompt-ids $ids --steps 24 --gpus 0,0 > $out/run-tp2.txt 2> $out/run-tp2.err
echo "kern run tp2 rc $? ($(( $(date +%s) - t0 )) s): $(cat $out/run-tp2.txt)" >> $R
grep -E "ranks:|generated|warn|error" $out/run-tp2.err >> $R
t=$(left)
[ $t -gt 20 ] && KERN_CTEST_ARGS="-R (ServeGpu|TensorParallel|Generator|KernelCatalogueGpu)" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > $out/suite.out 2>&1
echo "subset rc $? ($(( $(date +%s) - t0 )) s): $(tail -1 $out/suite.out 2>/dev/null)" >> $R
cat $R
