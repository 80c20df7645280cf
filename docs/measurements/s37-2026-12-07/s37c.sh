#!/usr/bin/env bash
# Session 37, device call 4 (a fresh machine): issue 17's whole table, as s30f.sh (ceilings and kern
# bench with the peer from the same run; concurrency 1 / 8 / 32 / 64 / 128 / 256 at 1,024 in / 128 out;
# the 14k-token prefix test; --no-batch-invariant at 64; a 60 s soak of 256 streams), now with per-m
# timed picks and the decode attention's used bound; then CaptureGpu.KernRunAndTorchPeer (the pack
# now carries libkern_capture.so) and the decode attention new vs old (build/kernels-old).
# Run (carry [".devrun"]): bash docs/measurements/s37-2026-12-07/s37c.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs37c; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $out/bench-peer.txt 2> $L/bench.err; echo "bench rc $? ($(el) s)" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 3000)
pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 60000)
echo "ceilings: copy $copy GB/s, prefill (best one-chunk) $pre tok/s" >> $R
serve() {  # serve PORT EXTRA... ; sets pid
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $1 --max-seqs 256 "${@:2}" > $L/serve-$1.out 2> $L/serve-$1.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$1/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server :$1 ${*:2} ready after $(el) s" >> $R
}
load() {  # load PORT NAME ARGS...
  timeout "${T:-300}" python3 bench/serve_load.py --url http://127.0.0.1:$1 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 "${@:3}" > $L/$2.log 2>&1; echo "load $2 rc $? ($(el) s)" >> $R
  grep -v "^json" $L/$2.log >> $R
}
stop() { kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; grep -E "\[error\]" $L/serve-$1.err | tail -3 >> $R; }
serve 8071
T=240 load 8071 load-table --concurrency 1 8 32 64 128 256 --rate 16 --prefix-test 14000
stop 8071
serve 8072 --no-batch-invariant
T=80 load 8072 load-noinv --concurrency 64
stop 8072
serve 8073 --no-prefix-cache
timeout 90 python3 tests/gpu/serve/soak.py http://127.0.0.1:8073 m4b 60 256 > $L/soak.log 2>&1; echo "soak rc $? ($(el) s)" >> $R
tail -5 $L/soak.log >> $R
stop 8073
(cd build && timeout 100 ctest -R CaptureGpu --output-on-failure > $L/cap.log 2>&1); echo "capture rc $? ($(el) s)" >> $R
grep -E "tests passed|Failed|error" $L/cap.log | head -5 >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
for v in new old; do
  d=$root/build/kernels; [ $v = old ] && d=$root/build/kernels-old
  (cd build && KERN_KERNELS_DIR=$d timeout 50 $K --gtest_filter=PerfGpu.DecodeAttentionLengthOnlySplit > $L/perf-$v.log 2>&1)
  echo "attention perf $v rc $? ($(el) s)" >> $R
  grep -E "seqs (1|64) len 1024 us per layer" $L/perf-$v.log | sed "s/^/$v /" >> $R
done
echo "total $(el) s" >> $R
cat $R
