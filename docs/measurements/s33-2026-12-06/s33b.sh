#!/usr/bin/env bash
# Session 33, device round 2: the TP=2-on-one-GPU test (which rows differ), kern run --gpus 0,0 on a
# --tp 2 --tp-peer-allreduce manifest against the one-rank manifest (same tiny checkpoint, greedy),
# kern bench --gpus 0,0 on the tiny shape, then the whole GPU suite.
# Run (carry [".devrun"]): bash docs/measurements/s33-2026-12-06/s33b.sh $OUT
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
grep -E "^\[tp\]|Failure|Expected|Which is|exception|OK \]|FAILED" $out/tp.log | head -60 >> $R
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
timeout 470 bash scripts/gpu-tests.sh build $out/gpu-tests.log > $out/suite.out 2>&1; echo "suite rc $? ($(( $(date +%s) - t0 )) s)" >> $R
tail -1 $out/suite.out >> $R
grep -E "\*\*\*Failed|Timeout|Not Run" $out/gpu-tests.log | head -20 >> $R
cat $R
