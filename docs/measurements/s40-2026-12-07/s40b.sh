#!/usr/bin/env bash
# Session 40, device call 2: the engine's sinks overlapping the next decode call (this session's
# engine change), A/B at concurrency 64 (1,024 in / 128 out, serve defaults, 4B shape): kern built
# before the change (.devrun/kern-old, the parent commit's serve code) and after (build/bin/kern),
# alternated on fresh servers, twice each.
# Run (carry [".devrun"]): bash docs/measurements/s40-2026-12-07/s40b.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1  # synth copies the tokenizer beside the weights
[ -f /tmp/m4b/tokenizer.json ] || { rm -rf /tmp/m4b; timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R; }
port=8200
for bin in .devrun/kern-old build/bin/kern .devrun/kern-old build/bin/kern; do
  port=$((port + 1))
  KERN_LOG=info $bin serve --weights /tmp/m4b --kernels build/kernels --port $port > $L/serve-$port.out 2> $L/serve-$port.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "[$bin] up ($(el) s)" >> $R
  timeout 60 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --input-len 1024 --output-len 128 --concurrency 64 > $L/load-$port.log 2>&1
  echo "[$bin] load rc $? ($(el) s)" >> $R
  grep -v "^json" $L/load-$port.log | sed "s#^#[$bin] #" >> $R
  kill -TERM $pid; wait $pid
done
echo "total $(el) s" >> $R
cat $R
