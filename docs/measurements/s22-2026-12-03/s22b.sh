#!/usr/bin/env bash
# Session 22, device round 2: kern serve without prefill logits (and the prefill attention's first_row), 4B shape:
# kern bench --batches, then kern serve --max-seqs 256 at concurrency 1 and 64; the choices as logged.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/l
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/l/tok.log 2>&1
timeout 100 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/l/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json /tmp/l/bench.json > $out/bench.txt 2> /tmp/l/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^prefill/p' $out/bench.txt | grep -E "^ +[0-9]|decode_|attn_decode" >> $R
copy=$(python3 -c "import json;print(json.load(open('/tmp/l/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4240)
pre=$(python3 -c "import json;print(json.load(open('/tmp/l/bench.json'))['prefill'][0]['tokens_per_s'])" 2>/dev/null || echo 54000)
KERN_LOG=debug build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port 8051 --max-seqs 256 > /tmp/l/serve.out 2> /tmp/l/serve.err &
pid=$!
for i in $(seq 1 240); do curl -sf localhost:8051/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
echo "server ready after $(( $(date +%s) - t0 )) s" >> $R
timeout 90 python3 bench/serve_load.py --url http://127.0.0.1:8051 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 --prefix-test 14000 > /tmp/l/load.log 2>&1; echo "load rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -v "^json" /tmp/l/load.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
grep -E "cuBLASLt n=.*candidate|offers .* not #" /tmp/l/serve.err | sort | uniq | head -12 >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
