#!/usr/bin/env bash
# Session 39, device call 6 (the same warm H200): concurrency 64 (1,024 in / 128 out) under the serve
# defaults and three decode-attention settings that keep batch invariance (the length-only split's
# tokens per range; the block-item kernel), each on a fresh server; ceilings from call 4.
# Run (carry [".devrun"]): COPY=4253 PRE=69082 bash docs/measurements/s39-2026-12-07/s39e.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs39e; R=$out/results.log; mkdir -p $L
root=$(pwd -P); export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
port=8100
for v in "" "--attn-split-tokens 256" "--attn-split-tokens 64" "--decode-attn-items block" ""; do
  port=$((port + 1))
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port $v > $L/serve-$port.out 2> $L/serve-$port.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  timeout 60 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $COPY --prefill-tok-s $PRE --input-len 1024 --output-len 128 --concurrency 64 > $L/load-$port.log 2>&1
  echo "[${v:-defaults}] load rc $? ($(el) s)" >> $R
  grep -v "^json" $L/load-$port.log | sed "s/^/[${v:-defaults}] /" >> $R
  kill -TERM $pid; wait $pid
done
echo "total $(el) s" >> $R
cat $R
