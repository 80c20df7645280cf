#!/usr/bin/env bash
# Session 20, device round 1: the warp-item decode attention (correctness against the float64
# reference and batch invariance for every partial kernel, then the length-only split sweep), the
# engine GPU tests with the page-table row cache, kern bench --batches for the block kernel and the
# warp kernel at two range lengths, then kern serve --max-seqs 256 at concurrency 1 and 64:
# batch-invariant with each kernel, and not batch-invariant.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
timeout 150 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='AttnDecodeGpu.*:PerfGpu.DecodeAttentionLengthOnlySplit' > $out/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED|length-only" $out/attn.log | grep -v "rel err" >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
timeout 200 build/tests/gpu/serve/test_serve_gpu > $out/serve-gpu.log 2>&1; echo "serve gpu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[serve-gpu\]|OK \]|FAILED" $out/serve-gpu.log | grep -v "first difference" >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
for v in block warp128 warp64; do
  extra=""
  case $v in warp128) extra="--decode-attn-warp --attn-split-tokens 128";; warp64) extra="--decode-attn-warp --attn-split-tokens 64";; esac
  timeout 200 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 $extra --json $out/bench-$v.json > $out/bench-$v.txt 2> $out/bench-$v.err; echo "bench $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  sed -n '/^decode at batch B/,/^prefill/p' $out/bench-$v.txt | grep -E "^ +[0-9]|attn_decode" >> $R
done
copy=$(python3 -c "import json;print(json.load(open('$out/bench-block.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$out/bench-block.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
port=8031
for mode in inv-block inv-warp128 noinv; do
  extra=""
  case $mode in noinv) extra="--no-batch-invariant";; inv-warp128) extra="--decode-attn-warp --attn-split-tokens 128";; esac
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
