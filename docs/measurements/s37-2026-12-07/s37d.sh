#!/usr/bin/env bash
# Session 37, the last device call (a fresh machine, ~300 s of device time left): the warp decode
# kernel's shared-memory table of used ranges (correctness, then timed against the kernel before it in
# build/kernels-prev, built from HEAD~ of that commit), kern run --gpus 0,0 after the RanksExecutor
# interleave (was a 32 s first prefill), then on an H200 issue 17's concurrency-64 figures, on any
# machine kern bench on the 0.6B and 8B shapes with the peer (scripts/bench-shapes.sh) as time allows.
# Build kernels-prev (see the commit message), pack, carry [".devrun"]:
#   bash docs/measurements/s37-2026-12-07/s37d.sh $OUT [seconds, 280]
set -u
out=$1
limit=${2:-280}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( limit - ($(date +%s) - t0) )); }
L=/tmp/logs37d; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader); echo "$gpu" >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
(cd build && timeout 60 $K --gtest_filter='AttnDecodeGpu.*' > $out/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -cE "OK \]" $out/attn.log | sed 's/^/AttnDecodeGpu OK count /' >> $R
grep -E "FAILED|Failure" $out/attn.log | head -10 >> $R
for v in new prev; do
  d=$root/build/kernels; [ $v = prev ] && d=$root/build/kernels-prev
  (cd build && KERN_KERNELS_DIR=$d timeout 50 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > $L/perf-$v.log 2>&1)
  echo "perf $v rc $? ($(el) s)" >> $R
  grep -E "us per layer" $L/perf-$v.log | grep -E "(warp split 128|mma).*(seqs 1 len 1024|seqs 64 len 1024|lens )" | sed "s/^/$v /" >> $R
done
cp $L/perf-new.log $L/perf-prev.log $out/ 2>/dev/null
bash scripts/setup-tokenizer.sh > $L/tok.log 2>&1
k=build/bin/kern
timeout 30 $k synth qwen3 --preset tiny -o /tmp/tiny > /dev/null 2>&1
$k gen qwen3 /tmp/tiny --max-seqs 8 --max-tokens 512 --tp 2 --tp-peer-allreduce -o /tmp/tp2.json 2> /dev/null
ids=$(python3 -c "import random;r=random.Random(5);print(','.join(str(r.randrange(100,150000)) for _ in range(300)))")
s1=$(date +%s%N)
KERN_NO_FABRIC=1 timeout 60 $k run --manifest /tmp/tp2.json --kernels build/kernels --weights /tmp/tiny --prompt-ids $ids --steps 24 --gpus 0,0 > $L/run-tp2.txt 2> $L/run-tp2.err
echo "kern run --gpus 0,0 rc $? in $(( ($(date +%s%N) - s1) / 1000000 )) ms ($(el) s): $(head -c 200 $L/run-tp2.txt)" >> $R
grep -E "prefill|ranks:|generated|warn|error" $L/run-tp2.err | head -5 >> $R
if echo "$gpu" | grep -q H200 && [ $(left) -gt 90 ]; then
  timeout 40 $k synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
  timeout 60 $k bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $out/bench-h200.txt 2>&1; echo "bench rc $? ($(el) s)" >> $R
  copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4200)
  pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 69000)
  echo "ceilings: copy $copy GB/s, prefill $pre tok/s" >> $R
  for extra in "" "--no-batch-invariant"; do
    KERN_LOG=info $k serve --weights /tmp/m4b --kernels build/kernels --port 8075 --max-seqs 256 $extra > $L/serve.out 2> $L/serve.err &
    pid=$!
    for i in $(seq 1 240); do curl -sf localhost:8075/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
    timeout 60 python3 bench/serve_load.py --url http://127.0.0.1:8075 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 64 > $L/load.log 2>&1
    echo "load 64 $extra rc $? ($(el) s)" >> $R; grep -v "^json" $L/load.log >> $R
    kill -TERM $pid; wait $pid
  done
fi
if [ $(left) -gt 60 ]; then
  KERN_BENCH_SHAPES=0.6b,8b timeout $(( $(left) - 5 )) bash scripts/bench-shapes.sh /tmp/shapes --contexts 1024 --prefill 2048 --no-startup --no-pool --replays 50 > $out/shapes.txt 2> $L/shapes.err
  echo "bench-shapes rc $? ($(el) s)" >> $R
  cp /tmp/shapes/*.txt $out/ 2>/dev/null
  grep -E "^==|decode step at 1k|peer step|kern tok/s" $out/shapes.txt >> $R
fi
echo "total $(el) s" >> $R
cat $R
