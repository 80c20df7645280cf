#!/usr/bin/env bash
# Session 19, device round 3: page-table rows written per group from the first changed entry
# (ProtocolRunner): the engine GPU tests (bitwise against kern run), kern bench --batches (the
# runner's call against the graph replay), then kern serve --max-seqs 256 at concurrency 1 and 64,
# batch-invariant and not.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED" $out/serve-gpu.log | grep -v "first difference" >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 300 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json $out/bench.json > $out/bench.txt 2> $out/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^per-op/p' $out/bench.txt >> $R
copy=$(python3 -c "import json;print(json.load(open('$out/bench.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$out/bench.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8031
for mode in inv noinv; do
  extra=""; [ $mode = noinv ] && extra="--no-batch-invariant"
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 $extra > $out/serve-$mode.out 2> $out/serve-$mode.err &
  pid=$!
  for i in $(seq 1 300); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  echo "$mode server ready after $(( $(date +%s) - t0 )) s" >> $R
  timeout 200 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 > $out/load-$mode.log 2>&1; echo "load $mode rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $out/load-$mode.log >> $R
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  port=$((port + 1))
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
