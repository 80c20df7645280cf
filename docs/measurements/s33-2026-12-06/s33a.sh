#!/usr/bin/env bash
# Session 33, device round 1 (asked for an H200): the TP=2-on-one-GPU test (which rows differ), kern run
# --gpus 0,0 and kern bench --gpus 0,0 on the tiny shape, then
# issue 17's load table as in s30f.sh (kern serve --max-seqs 256 on the 4B shape: concurrency 1 / 8 /
# 32 / 64 / 128 / 256, Poisson 16/s, the 14k prefix run; --no-batch-invariant at 1 and 64; the
# 60-second soak), then kern bench on the 4B shape with the PyTorch peer (issue 18's figures on this card).
# Run (carry [".devrun"]): bash docs/measurements/s33-2026-12-06/s33a.sh $OUT
set -u
out=$1
R=$out/results.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
(cd build && timeout 90 tests/gpu/serve/test_tp_gpu > $out/tp.log 2>&1); echo "tp rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[tp\]|Failure|Expected|Which is|exception|OK \]|FAILED" $out/tp.log | head -40 >> $R
k=$root/build/bin/kern
bash scripts/setup-tokenizer.sh > $out/setup-tokenizer.log 2>&1
$k synth qwen3 --preset tiny -o /tmp/tiny > /dev/null 2>&1; echo "synth rc $?" >> $R
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 -o /tmp/tp1.json 2>> $R
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 --tp 2 --tp-peer-allreduce -o /tmp/tp2.json 2>> $R
ids=$(python3 -c "import random;r=random.Random(5);print(','.join(str(r.randrange(100,150000)) for _ in range(300)))")
for v in 1 2; do
  g=0; [ $v = 2 ] && g=0,0
  KERN_NO_FABRIC=1 timeout 60 $k run --manifest /tmp/tp$v.json --kernels build/kernels --weights /tmp/tiny --prompt-ids $ids --steps 24 --gpus $g > $out/run-tp$v.txt 2> $out/run-tp$v.err
  echo "kern run tp$v rc $?: $(cat $out/run-tp$v.txt)" >> $R
  grep -E "ranks:|generated" $out/run-tp$v.err >> $R
done
timeout 90 $k bench --weights /tmp/tiny --kernels build/kernels --quick --no-peer --no-startup --no-pool --contexts 1024 --prefill 512 --gpus 0,0 > $out/bench-tp.txt 2>&1; echo "bench --gpus 0,0 rc $?" >> $R
grep -A4 "tensor parallel:" $out/bench-tp.txt | head -6 >> $R; grep -E "^bench: decode at 1024" $out/bench-tp.txt >> $R
mkdir -p $out/load; bash docs/measurements/s30-2026-12-06/s30f.sh $out/load > $out/load.out 2>&1; echo "load script rc $? ($(( $(date +%s) - t0 )) s)" >> $R
cat $out/load/results.log >> $R
timeout 200 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-startup --no-pool --contexts 1024 --prefill 2048,8192 --json $out/bench.json > $out/bench.txt 2>&1
echo "bench with the peer rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)|MISS|PASS" $out/bench.txt >> $R
cat $R
