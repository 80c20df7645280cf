#!/usr/bin/env bash
# Session 36, device round 1: session 35's s35a.sh (which never got a machine) with the sampling op's
# race kernel of session 36 first (its CTAs taking rows in turn: SampleGpu*, the chi-square cases and
# PerfGpu.Sample, whose batch-64 lines time the op with the old grid beside the new one).
# s35a.sh's own text follows. Session 33's
# lazy-loading fix (the TP=2-on-one-GPU test, kern run --gpus 0,0 against the one-rank manifest: the
# 300-token prefill must no longer take 16 × 2 s, kern bench --gpus 0,0), then
#  - on an H100: the whole GPU suite, then the per-m equivalent GEMM answers (PerfGpuGemm.PerMEquivalentAnswers,
#    kern gen --gemm-per-m's mechanism) and the cuBLASLt candidates sweep with their bit hashes
#    (PerfGpuGemm.DecodeCandidatesAcrossBatchSizes: which answers compute the same bits);
#  - on an H200: issue 17's load table (s30f.sh) and kern bench with the peer first, the sweep, then
#    as much of the suite as the time left allows.
# Run (carry [".devrun"]): bash docs/measurements/s36-2026-12-07/s36a.sh $OUT [seconds, 570]
set -u
out=$1
limit=${2:-570}
R=$out/results.log
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)
echo "$gpu" > $R
t0=$(date +%s)
left() { echo $(( limit - ($(date +%s) - t0) )); }
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
k=$root/build/bin/kern
(cd build && timeout 150 tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='SampleGpu*:SampleChiSquare*:PerfGpu.Sample' > $out/sample.log 2>&1)
echo "sample tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[figure\] sample op|^\[figure\] argmax|OK \]|FAILED|Failure" $out/sample.log | grep -v "cluster kernel alone" >> $R
(cd build && timeout 90 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\] [0-9]+ rows|Failure|Expected|Which is|exception|OK \]|FAILED|warn" $out/tp.log | head -20 >> $R
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
timeout 60 $k bench --weights /tmp/tiny --kernels build/kernels --quick --no-peer --no-startup --no-pool --contexts 1024 --prefill 512 --gpus 0,0 > $out/bench-tp.txt 2>&1; echo "bench --gpus 0,0 rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "tensor parallel: (decode|prefill)" $out/bench-tp.txt | head -4 >> $R
suite() {  # suite CAP: the whole GPU suite in at most CAP seconds (and the time left)
  local t=$(left); [ $1 -lt $t ] && t=$1
  [ $t -gt 30 ] || { echo "suite not run: ${t} s left" >> $R; return; }
  # every GPU test but the candidates sweep (reporting only, long; sweep() runs it with the time left)
  KERN_CTEST_ARGS="-E PerfGpuGemm.DecodeCandidatesAcrossBatchSizes" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > $out/suite.out 2>&1
  echo "suite rc $? ($(( $(date +%s) - t0 )) s): $(tail -1 $out/suite.out)" >> $R
  grep -E "\*\*\*Failed|Timeout|\*\*\*Exception" $out/gpu-tests.log | head -10 >> $R
  gzip -c build/Testing/Temporary/LastTest.log > $out/LastTest.log.gz 2>/dev/null  # every test's output
  zcat $out/LastTest.log.gz | grep -E "^\[per-m\] step" >> $R
}
sweep() {  # the per-m equivalent answers unless the suite ran them, then the candidates' bit hashes
  local t=$(left); [ 90 -lt $t ] && t=90
  if ! grep -q "^\[per-m\] step" $R; then
    [ $t -gt 20 ] || { echo "per-m not run: ${t} s left" >> $R; return; }
    (cd build && timeout $t tests/gpu/runtime/test_runtime_gpu --gtest_filter='PerfGpuGemm.PerMEquivalentAnswers:RuntimeGpuGemmInvariance.*' > $out/gemm-per-m.log 2>&1)
    echo "per-m rc $? ($(( $(date +%s) - t0 )) s)" >> $R
    grep -E "^\[per-m\] step|OK \]|FAILED|Failure" $out/gemm-per-m.log >> $R
  fi
  t=$(left); [ 150 -lt $t ] && t=150
  [ $t -gt 20 ] || { echo "sweep not run: ${t} s left" >> $R; return; }
  (cd build && timeout $t tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $out/gemm-cand.log 2>&1)
  echo "sweep rc $? ($(( $(date +%s) - t0 )) s)" >> $R
}
case "$gpu" in
  *H200*)
    mkdir -p $out/load; bash docs/measurements/s30-2026-12-06/s30f.sh $out/load > $out/load.out 2>&1
    echo "load script rc $? ($(( $(date +%s) - t0 )) s)" >> $R; cat $out/load/results.log >> $R
    [ $(left) -gt 170 ] && timeout 150 $k bench --weights /tmp/m4b --kernels build/kernels --no-startup --no-pool --contexts 1024 --prefill 2048,8192 --json $out/bench.json > $out/bench.txt 2>&1
    echo "bench with the peer rc $? ($(( $(date +%s) - t0 )) s)" >> $R
    grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)|MISS|PASS" $out/bench.txt >> $R
    sweep; suite 600 ;;
  *) suite 600; sweep ;;
esac
cat $R
