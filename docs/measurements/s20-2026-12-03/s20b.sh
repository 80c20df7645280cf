#!/usr/bin/env bash
# Session 20, device round 2: the warp-item decode attention with its walk cached in lanes (context
# lengths, page windows loaded one item ahead, the next item's q loading meanwhile) and an 8-warp
# variant; the kernel tests and the length-only sweep, kern bench --batches (block kernel, warp
# kernel at ranges of 64 and 128 keys), kern serve --max-seqs 256 at concurrency 1 and 64 with the
# warp kernel batch-invariant (64, 128) and not batch-invariant.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs /tmp/logs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
L=/tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
timeout 150 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='AttnDecodeGpu.*:PerfGpu.DecodeAttentionLengthOnlySplit' > $L/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED" $L/attn.log >> $R
grep "length-only" $L/attn.log | grep -E "us per layer|partial-only" | sed 's/\[figure\] decode length-only //' >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > /tmp/runs/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
for v in block warp64 warp128; do
  extra=""
  case $v in warp128) extra="--decode-attn-warp --attn-split-tokens 128";; warp64) extra="--decode-attn-warp --attn-split-tokens 64";; esac
  timeout 200 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 $extra --json $L/bench-$v.json > $L/bench-$v.txt 2> $L/bench-$v.err; echo "bench $v rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  sed -n '/^decode at batch B/,/^prefill/p' $L/bench-$v.txt | grep -E "^ +[0-9]|attn_decode" >> $R
done
copy=$(python3 -c "import json;print(json.load(open('$L/bench-block.json'))['ceilings']['copy_gbps'])")
pre=$(python3 -c "import json;print(json.load(open('$L/bench-block.json'))['prefill'][0]['tokens_per_s'])")
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
port=8031
for mode in inv-warp64 inv-warp128 noinv-warp; do
  extra=""
  case $mode in noinv-warp) extra="--no-batch-invariant --decode-attn-warp";; inv-warp128) extra="--decode-attn-warp --attn-split-tokens 128";; inv-warp64) extra="--decode-attn-warp --attn-split-tokens 64";; esac
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port --max-seqs 256 $extra > $L/serve-$mode.out 2> $L/serve-$mode.err &
  pid=$!
  for i in $(seq 1 300); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  echo "$mode ($extra) server ready after $(( $(date +%s) - t0 )) s" >> $R
  timeout 200 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 > $L/load-$mode.log 2>&1; echo "load $mode rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $L/load-$mode.log >> $R
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  port=$((port + 1))
done
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
