#!/usr/bin/env bash
# Session 18, device round 2: batch-invariant attention grid of 8 blocks per (sequence, kv head):
# the attention kernel tests, the engine among 63 others, kern bench (batch 1), and the 4B load at
# concurrency 1, 8, 64 (split 256) and 64 (split 512), with the roofline.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; rm -rf /tmp/m4b
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; rm -rf /tmp/m4b
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 200 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024,8192 --prefill 1024 --json $out/bench-inv.json > $out/bench-inv.txt 2> /tmp/runs/bench-inv.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/context .*GPU step/,+3p' $out/bench-inv.txt >> $R; grep -E "attn_decode|1024     1024" $out/bench-inv.txt >> $R
copy=$(python3 -c "import json;print(json.load(open('$out/bench-inv.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$out/bench-inv.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8012
for split in 256 512; do
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 --attn-split-tokens $split > $out/serve-$split.out 2> $out/serve-$split.err &
  pid=$!
  for i in $(seq 1 300); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  echo "split $split server ready after $(( $(date +%s) - t0 )) s" >> $R
  conc="64"; [ $split = 256 ] && conc="1 8 64"
  timeout 200 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency $conc > $out/load-$split.log 2>&1; echo "load split $split rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $out/load-$split.log >> $R
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  port=$((port + 1))
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
