#!/usr/bin/env bash
# Session 30, device round 4 (H200): where kern serve's concurrency-64 figure stands on the session-29
# tree (warp-specialised prefill attention since the last load run, session 22), and whether prefill
# calls of a whole 1,024-token prompt (--chunk 1024) instead of two of 512 (the default) move it.
# kern bench ceilings and prefill rates first (the roofline's inputs), then the load at concurrency 1
# and 64 for each server. Run (carry [".devrun"], full pack .devrun/pack.txz):
#   bash docs/measurements/s30-2026-12-06/s30d.sh $OUT
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
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ " $L/bench.txt | head -8 >> $R
cp $L/bench.txt $out/
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4240)
pre=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['prefill'][0]['tokens_per_s'])" 2>/dev/null || echo 54000)
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
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
stop() { kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; grep -E "engine|\[error\]" $L/serve-$1.err | tail -4 >> $R; }
serve 8051
T=120 load 8051 load-default --concurrency 1 64
stop 8051
serve 8052 --chunk 1024
T=120 load 8052 load-chunk1024 --concurrency 1 64
stop 8052
serve 8053 --chunk 1024 --prefill-budget 4096
T=120 load 8053 load-chunk1024-b4096 --concurrency 64
stop 8053
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
