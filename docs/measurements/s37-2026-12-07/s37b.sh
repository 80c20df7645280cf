#!/usr/bin/env bash
# Session 37, device call 2 (warm after s37a.sh, which unpacked the build and made /tmp/m4b): issue 17's
# load table with per-m and the decode attention change: ceilings from kern bench in the same run,
# kern serve --max-seqs 256, concurrency 1 / 8 / 32 / 64 / 128 / 256 (1,024 in / 128 out), then
# --no-batch-invariant at 64. Run: bash docs/measurements/s37-2026-12-07/s37b.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs37b; R=$out/results.log; mkdir -p $L
[ -x build/bin/kern ] || tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
[ -f /tmp/m4b/config.json ] || timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-startup --no-pool --contexts 1024 --prefill 1024,2048 --chunk 512 --json $L/bench.json > $out/bench-peer.txt 2> $L/bench.err; echo "bench rc $? ($(el) s)" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 3000)
pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 60000)
echo "ceilings: copy $copy GB/s, prefill (best one-chunk) $pre tok/s" >> $R
grep -E "^decode|^prefill|peer|floor" $out/bench-peer.txt | head -12 >> $R
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
T=240 load 8071 load-table --concurrency 1 8 32 64 128 256
stop 8071
serve 8072 --no-batch-invariant
T=80 load 8072 load-noinv --concurrency 64
stop 8072
echo "total $(el) s" >> $R
cat $R
