#!/usr/bin/env bash
# Session 35, device round for the last ~560 s of the session's device time: s35a.sh cut to what must run.
# Session 33's lazy-loading fix (the TP=2-on-one-GPU test, kern run --gpus 0,0 against the one-rank
# manifest: the 300-token prefill must no longer take 16 × 2 s), then the GPU suite without the timing
# tests (PerfGpu.*, PerfGpuGemm.Decode*) but with PerfGpuGemm.PerMEquivalentAnswers (algo_per_m's rows
# and speed), every test's output kept, then the candidates sweep with the time left.
# Run (carry [".devrun"]): bash docs/measurements/s35-2026-12-07/s35c.sh $OUT [seconds, 430]
set -u
out=$1
limit=${2:-430}
R=$out/results.log
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)
echo "$gpu" > $R
t0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - t0) )); }
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
(cd build && timeout 60 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\] [0-9]+ rows|Failure|Expected|Which is|exception|OK \]|FAILED|warn" $out/tp.log | head -20 >> $R
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
$k synth qwen3 --preset tiny -o /tmp/tiny > /dev/null 2>&1; echo "synth rc $?" >> $R
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 -o /tmp/tp1.json 2> /dev/null
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 --tp 2 --tp-peer-allreduce -o /tmp/tp2.json 2> /dev/null
ids=$(python3 -c "import random;r=random.Random(5);print(','.join(str(r.randrange(100,150000)) for _ in range(300)))")
for v in 1 2; do
  g=0; [ $v = 2 ] && g=0,0
  KERN_NO_FABRIC=1 timeout 40 $k run --manifest /tmp/tp$v.json --kernels build/kernels --weights /tmp/tiny --prompt-ids $ids --steps 24 --gpus $g > $out/run-tp$v.txt 2> $out/run-tp$v.err
  echo "kern run tp$v rc $? ($(( $(date +%s) - t0 )) s): $(cat $out/run-tp$v.txt)" >> $R
  grep -E "ranks:|generated|warn|error" $out/run-tp$v.err >> $R
done
t=$(left)
KERN_CTEST_ARGS="-E (PerfGpu\.|PerfGpuGemm\.Decode)" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > $out/suite.out 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s): $(tail -1 $out/suite.out)" >> $R
grep -E "\*\*\*Failed|Timeout|\*\*\*Exception" $out/gpu-tests.log | head -10 >> $R
gzip -c build/Testing/Temporary/LastTest.log > $out/LastTest.log.gz 2>/dev/null
zcat $out/LastTest.log.gz | grep -E "^\[per-m\]" >> $R
t=$(left)
if [ $t -gt 30 ]; then
  (cd build && timeout $t tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $out/gemm-cand.log 2>&1)
  echo "sweep rc $? ($(( $(date +%s) - t0 )) s)" >> $R
fi
cat $R
