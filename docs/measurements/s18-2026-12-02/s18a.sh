#!/usr/bin/env bash
# Session 18, device round 1: batch invariance (kernel tests, engine vs generator alone / among 63,
# HTTP vs kern run), kern bench invariant vs not (batch-1 decode, ceilings), and the 4B load with
# its roofline, batch-invariant vs --no-batch-invariant.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
timeout 150 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='AttnDecodeGpu.*' > "$out/attn.log" 2>&1; echo "attn rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|differs|Expected" "$out/attn.log" | head -30 >> $R
timeout 200 build/tests/gpu/serve/test_serve_gpu > "$out/serve.log" 2>&1; echo "serve-gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |FAILED|serve-gpu|Failure" "$out/serve.log" | head -30 >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
timeout 150 python3 tests/gpu/serve/serve_vs_run.py build/bin/kern build/kernels assets/default-model /tmp/svr > $out/serve_vs_run.log 2>&1; echo "serve_vs_run rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep "serve-vs-run" $out/serve_vs_run.log >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
for mode in inv noinv; do
  flag=""; [ $mode = noinv ] && flag=--no-batch-invariant
  timeout 200 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024,8192 --prefill 1024 $flag --json $out/bench-$mode.json > $out/bench-$mode.txt 2> /tmp/runs/bench-$mode.err; echo "bench $mode rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -E "decode|prefill|copy" $out/bench-$mode.txt | head -12 >> $R
done
copy=$(python3 -c "import json;print(json.load(open('$out/bench-inv.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$out/bench-inv.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8012
for mode in inv noinv; do
  flag=""; [ $mode = noinv ] && flag=--no-batch-invariant
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 $flag > $out/serve-$mode.out 2> $out/serve-$mode.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  echo "$mode server ready after $(( $(date +%s) - t0 )) s" >> $R
  conc="1 8 64"; [ $mode = inv ] && conc="1 8 32 64 128 256"
  timeout 300 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency $conc > $out/load-$mode.log 2>&1; echo "load $mode rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $out/load-$mode.log >> $R
  kill -TERM $pid; wait $pid; echo "$mode server exit $?" >> $R
  port=$((port + 1))
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
