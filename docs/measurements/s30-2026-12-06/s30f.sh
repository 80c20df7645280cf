#!/usr/bin/env bash
# Session 30, device round 6: kern serve --max-seqs 256 with the new prefill defaults (chunk 1,024,
# budget 4,096, 8 chunks packed per call): the whole load table (concurrency 1 / 8 / 32 / 64 / 128 /
# 256, Poisson 16/s, the 14k-token prefix run), --no-batch-invariant at 1 and 64 (the invariance
# cost), and a 60-second soak of 256 streams with random disconnects. Roofline prefill rate: kern
# bench's best one-chunk prefill. Run (carry [".devrun"], full pack .devrun/pack.txz):
#   bash docs/measurements/s30-2026-12-06/s30f.sh $OUT
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
serve 8071
T=240 load 8071 load-table --concurrency 1 8 32 64 128 256 --rate 16 --prefix-test 14000
stop 8071
serve 8072 --no-batch-invariant
T=100 load 8072 load-noinv --concurrency 1 64
stop 8072
serve 8073 --no-prefix-cache
timeout 90 python3 tests/gpu/serve/soak.py http://127.0.0.1:8073 m4b 60 256 > $L/soak.log 2>&1; echo "soak rc $? ($(( $(date +%s) - t0 )) s)" >> $R
tail -5 $L/soak.log >> $R
stop 8073
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
