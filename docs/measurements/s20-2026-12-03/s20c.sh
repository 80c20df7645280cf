#!/usr/bin/env bash
# Session 20, device round 3 (the tree as committed after it): kern serve --max-seqs 256 with the
# defaults (batch-invariant: the warp-item decode attention, ranges of >= 128 keys) and with
# --no-batch-invariant at concurrency 1 and 64; kern bench --batches; then the whole GPU suite and the
# HF gate (scripts/dev/check.sh).
set -u
out=$1
t0=$(date +%s)
L=/tmp/logs
R=$L/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs $L
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^prefill/p' $L/bench.txt | grep -E "^ +[0-9]|attn_decode" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4240)
pre=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['prefill'][0]['tokens_per_s'])" 2>/dev/null || echo 54000)
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8031
for mode in inv noinv; do
  extra=""; [ $mode = noinv ] && extra="--no-batch-invariant"
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 $extra > $L/serve-$mode.out 2> $L/serve-$mode.err &
  pid=$!
  for i in $(seq 1 120); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "$mode server ready after $(( $(date +%s) - t0 )) s" >> $R
  timeout 100 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 > $L/load-$mode.log 2>&1; echo "load $mode rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $L/load-$mode.log >> $R
  kill -TERM $pid 2>/dev/null; wait $pid; echo "server exit $?" >> $R
  port=$((port + 1))
done
SUITE_TIMEOUT=300 GATE_TIMEOUT=130 bash scripts/dev/check.sh build $L/chk "tiny default" >> $R 2>&1
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
