#!/usr/bin/env bash
# Session 40, device call 5: issue 17's load table with this session's engine (sinks told while the
# next decode call runs), ceilings measured first in the same call (kern bench, no peer: its copy
# ceiling and its best one-chunk prefill rate), then concurrency 64 on the build before the change
# (.devrun/kern-old) and once more on the new one, each on a fresh server.
# Run (carry [".devrun"]): bash docs/measurements/s40-2026-12-07/s40d.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
[ -f /tmp/m4b/tokenizer.json ] || { rm -rf /tmp/m4b; timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R; }
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(el) s)" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 3000)
pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 60000)
echo "ceilings: copy $copy GB/s, prefill (best one-chunk) $pre tok/s" >> $R
serve() {  # serve BINARY PORT ARGS...
  KERN_LOG=info $1 serve --weights /tmp/m4b --kernels build/kernels --port $2 "${@:3}" > $L/serve-$2.out 2> $L/serve-$2.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$2/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server $1 :$2 ready after $(el) s" >> $R
}
load() {  # load PORT NAME ARGS...
  timeout "${T:-240}" python3 bench/serve_load.py --url http://127.0.0.1:$1 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 "${@:3}" > $L/$2.log 2>&1; echo "load $2 rc $? ($(el) s)" >> $R
  grep -v "^json" $L/$2.log >> $R
}
stop() { kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; }
serve build/bin/kern 8301; load 8301 table --concurrency 1 8 32 64 128 256; stop
serve .devrun/kern-old 8302; T=60 load 8302 old-64 --concurrency 64; stop
serve build/bin/kern 8303; T=60 load 8303 new-64 --concurrency 64; stop
echo "total $(el) s" >> $R
cat $R
