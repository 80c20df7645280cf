#!/usr/bin/env bash
# Session 19, device round 2: kern bench with batched decode (--batches, kern serve's runner) on the
# 4B shape, decode GEMMs chosen at algo_m = 128 for the 256-sequence manifest; then kern serve
# --max-seqs 256 at concurrency 1 and 64 with the engine's phase split.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 300 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json $out/bench.json > $out/bench.txt 2> $out/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^prefill/p' $out/bench.txt >> $R; grep -E "^  +1024 " $out/bench.txt >> $R
copy=$(python3 -c "import json;print(json.load(open('$out/bench.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$out/bench.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8021
build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 > $out/serve.out 2> $out/serve.err &
pid=$!
for i in $(seq 1 300); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
echo "server ready after $(( $(date +%s) - t0 )) s" >> $R
timeout 200 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 > $out/load.log 2>&1; echo "load rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -v "^json" $out/load.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
