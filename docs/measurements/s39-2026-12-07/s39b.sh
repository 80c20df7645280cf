#!/usr/bin/env bash
# Session 39, device call 2: on an H200, issue 17's load table (s37c.sh, the same procedure; its last
# step needs build/kernels-old and fails at once without it) and kern bench on the three shapes; on an
# H100, the whole GPU suite (the batch-prompt serve changes and the new default --max-seqs 256). On
# either, then: kern serve at concurrency 1 and 8 with --max-seqs 64 against the new default 256, one
# server after the other on the same machine (what the default costs a lone stream).
# Run (carry [".devrun"]): bash docs/measurements/s39-2026-12-07/s39b.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
R=$out/results.log; L=/tmp/logs39b; mkdir -p $L
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $gpu" >> $R
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
if echo "$gpu" | grep -q H200; then
  timeout 300 bash docs/measurements/s37-2026-12-07/s37c.sh $out/s37c > /dev/null 2>&1
  mkdir -p $out/s37c; cat $out/s37c/results.log >> $R 2>/dev/null
else
  timeout 400 scripts/gpu-tests.sh build $out/gpu-suite.log > /dev/null 2>&1
  echo "suite rc $? ($(el) s)" >> $R
  tail -1 $out/gpu-suite.log >> $R
  grep -E "^\s*[0-9]+ - |Failed|\*\*\*" $out/gpu-suite.log | head -20 >> $R
  bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
  timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R
fi
for ms in 64 default; do
  extra=(); [ $ms = default ] || extra=(--max-seqs $ms)
  port=$((8090 + ${#extra[@]}))
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port "${extra[@]}" > $L/serve-$ms.out 2> $L/serve-$ms.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server --max-seqs $ms ready after $(el) s" >> $R
  timeout 90 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps 4000 --prefill-tok-s 60000 --input-len 1024 --output-len 128 --concurrency 1 8 > $L/load-$ms.log 2>&1
  echo "load --max-seqs $ms rc $? ($(el) s)" >> $R
  grep -v "^json" $L/load-$ms.log | sed "s/^/[max-seqs $ms] /" >> $R
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  grep -E "\[error\]" $L/serve-$ms.err | tail -3 >> $R
done
if echo "$gpu" | grep -q H200 && [ $(el) -lt 420 ]; then
  KERN_BENCH_SHAPES=0.6b,4b,8b timeout $(( 570 - $(el) )) scripts/bench-shapes.sh /tmp/shapes --contexts 1024 --prefill 2048 --no-startup --no-pool --replays 50 > $out/shapes.txt 2>&1
  echo "shapes rc $? ($(el) s)" >> $R
  cp /tmp/shapes/*.txt $out/ 2>/dev/null
fi
echo "total $(el) s" >> $R
cat $R
