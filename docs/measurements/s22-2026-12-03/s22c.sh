#!/usr/bin/env bash
# Session 22, device round 3: mixed steps. The engine GPU tests (a new one runs kern serve's mixed
# program on the tiny model: 64 requests' tokens against kern run's, bitwise), then kern serve
# --max-seqs 256 on the 4B shape with mixed steps (the default) at concurrency 1 and 64 and the
# prefix-cache run, and --no-mixed at 64 in the same run.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/l
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/l/tok.log 2>&1
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED|Failure|Expected|Which is" $out/serve-gpu.log | grep -v "first difference" | head -30 >> $R
timeout 100 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/l/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
copy=4230; pre=54228
load() {  # port, levels, server args...
  local port=$1 levels=$2; shift 2
  KERN_LOG=debug build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 "$@" > /tmp/l/serve-$port.out 2> /tmp/l/serve-$port.err &
  local pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server $port ($*) ready after $(( $(date +%s) - t0 )) s" >> $R
  grep -E "mixed steps" /tmp/l/serve-$port.err | head -2 >> $R
  timeout 120 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency $levels > /tmp/l/load-$port.log 2>&1; echo "load $port rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" /tmp/l/load-$port.log >> $R
  cp /tmp/l/load-$port.log $out/
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  grep -E "error|Error" /tmp/l/serve-$port.err | head -5 >> $R
  pkill -f "bin/kern serve" 2>/dev/null; sleep 1
}
load 8061 "1 64"
load 8062 "64" --no-mixed
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
