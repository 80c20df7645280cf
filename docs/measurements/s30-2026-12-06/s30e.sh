#!/usr/bin/env bash
# Session 30, device round 5: packed prefill (kern serve --prefill-chunks, default 8). The engine GPU
# tests (ServeGpu.*: the new packed case among them, tokens bitwise equal to kern run alone and among
# 63 others), then kern serve --max-seqs 256 at concurrency 1 and 64: unpacked (--prefill-chunks 1,
# the session-29 behaviour), packed at the old budget (chunk 512, budget 2048), packed at chunk 1024 /
# budget 4096, and packed at chunk 2048 / budget 8192. The roofline's prefill rate: kern bench's best
# one-chunk prefill (1,024 or 2,048 tokens). Run (carry [".devrun"], full pack .devrun/pack.txz):
#   bash docs/measurements/s30-2026-12-06/s30e.sh $OUT
set -u
out=$1
t0=$(date +%s)
L=/tmp/logs
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p $L
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
timeout 150 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED|Failure" $out/serve-gpu.log | grep -v "first difference" | head -30 >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ " $L/bench.txt | head -8 >> $R
cp $L/bench.txt $out/
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 3000)
pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 60000)
echo "ceilings: copy $copy GB/s, prefill (best one-chunk) $pre tok/s" >> $R
serve() {  # serve PORT EXTRA... ; sets pid
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $1 --max-seqs 256 "${@:2}" > $L/serve-$1.out 2> $L/serve-$1.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$1/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server :$1 ${*:2} ready after $(( $(date +%s) - t0 )) s" >> $R
}
load() {  # load PORT LOG ARGS...
  timeout "${T:-300}" python3 bench/serve_load.py --url http://127.0.0.1:$1 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 "${@:3}" > $L/$2.log 2>&1; echo "load $2 rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $L/$2.log >> $R
  cp $L/$2.log $out/
}
stop() { kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; grep -E "\[error\]" $L/serve-$1.err | tail -3 >> $R; }
serve 8061 --prefill-chunks 1
T=100 load 8061 load-unpacked --concurrency 64
stop 8061
serve 8062
T=120 load 8062 load-packed-512-2048 --concurrency 1 64
stop 8062
serve 8063 --chunk 1024 --prefill-budget 4096
T=120 load 8063 load-packed-1024-4096 --concurrency 1 64
stop 8063
serve 8064 --chunk 2048 --prefill-budget 8192
T=100 load 8064 load-packed-2048-8192 --concurrency 64
stop 8064
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
