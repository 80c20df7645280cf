#!/usr/bin/env bash
# Session 22, device round 4: mixed steps with the prefill budget kept (a step's last chunks ride
# beside its decode rows). The engine GPU tests, then kern serve --max-seqs 256 on the 4B shape: the
# whole load table with mixed steps (1 / 8 / 32 / 64 / 128 / 256, Poisson 16/s, the prefix run), and
# --no-mixed and --no-batch-invariant at 1 and 64 in the same run.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/l
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/l/tok.log 2>&1
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED|Failure" $out/serve-gpu.log | grep -v "first difference" | head -30 >> $R
timeout 100 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/l/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
copy=4230; pre=54228
load() {  # port, load args, server args...
  local port=$1 levels=$2; shift 2
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 "$@" > /tmp/l/serve-$port.out 2> /tmp/l/serve-$port.err &
  local pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server $port ($*) ready after $(( $(date +%s) - t0 )) s" >> $R
  timeout 240 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 $levels > /tmp/l/load-$port.log 2>&1; echo "load $port rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" /tmp/l/load-$port.log >> $R
  cp /tmp/l/load-$port.log $out/
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  grep -E "\[error\]" /tmp/l/serve-$port.err | head -5 >> $R
  pkill -f "bin/kern serve" 2>/dev/null; sleep 1
}
load 8071 "--concurrency 1 8 32 64 128 256 --rate 16 --prefix-test 14000"
load 8072 "--concurrency 1 64" --no-mixed
load 8073 "--concurrency 1 64" --no-batch-invariant
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
