#!/usr/bin/env bash
# Session 40, prepared for the next device call (NOT RUN in session 40: its device time ran out):
# the key-major decode attention partials (kern_attn_decode_{mma,warp}_km_partial_hd*, kern gen
# --decode-attn-key-major; docs/perf.md, session 40): their float64 and batch-invariance checks and
# the catalogue's ABI check, their timing beside the production kernels in one binary (also the warp
# one at 4 blocks per SM: warp_km4), kern bench at batch 1 (1k, 32k) and the 64-stream step, and kern
# serve at concurrency 64 with it and without, ceilings measured first. Best on an H200 (the
# kernel's case is the H200's bandwidth).
# Run (carry [".devrun"], after bash scripts/dev/pack.sh build .devrun/pack.txz):
#   bash docs/measurements/s40-2026-12-07/s40e.sh $OUT
# Knobs (session 41): REPEAT=0 drops the third (repeat) server; SERVE=0 every server; NCU_UNTIL (480) the second after which no ncu run starts.
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
L=$out/logs; R=$out/results.log; mkdir -p $L
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
K=$root/build/tests/gpu/kernels/kern_kernels_gpu_test
(cd build && timeout 200 $K --gtest_filter='AttnDecodeGpu.*:KernelCatalogueGpu.*' > $L/attn.log 2>&1); echo "AttnDecodeGpu rc $? ($(el) s)" >> $R
grep -E "^\[  PASSED|^\[  FAILED|tests ran" $L/attn.log >> $R
(cd build && timeout 150 $K --gtest_filter='PerfGpu.DecodeAttentionLengthOnlySplit:PerfGpu.DecodeAttentionPerCallCost' > $L/perf.log 2>&1); echo "perf rc $? ($(el) s)" >> $R
grep -E "(mma|mma_km) split 256 .*us per layer|(warp|warp_km|warp_km4) split 128 grid (396|528) .*us per layer|partial-only|per-call" $L/perf.log | sed 's/\[figure\] decode //' >> $R
bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
[ -f /tmp/m4b/tokenizer.json ] || { rm -rf /tmp/m4b; timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R; }
for v in "" "--decode-attn-key-major"; do
  n=$([ -z "$v" ] && echo default || echo km)
  timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --quick --no-peer --no-startup --no-pool \
    --contexts 1024,32768 --prefill 2048 --batches 1,64 --json $L/bench-$n.json $v > $L/bench-$n.txt 2> $L/bench-$n.err
  echo "bench $n rc $? ($(el) s)" >> $R
  grep -E "batched decode at|ceiling|^ +(1024|32768) " $L/bench-$n.err $L/bench-$n.txt | head -8 | sed "s/^/$n /" >> $R
done
copy=$(python3 -c "import json;print(json.load(open('$L/bench-default.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 3000)
pre=$(python3 -c "import json;print(max(p['tokens_per_s'] for p in json.load(open('$L/bench-default.json'))['prefill'] if p['chunk']==p['tokens']))" 2>/dev/null || echo 60000)
echo "ceilings: copy $copy GB/s, prefill $pre tok/s" >> $R
port=8400
servers=("" "--decode-attn-key-major" "")
[ "${REPEAT:-1}" = 1 ] || servers=("" "--decode-attn-key-major")
[ "${SERVE:-1}" = 1 ] || servers=()
for v in "${servers[@]}"; do
  port=$((port + 1))
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port $v > $L/serve-$port.out 2> $L/serve-$port.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  timeout 60 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 64 > $L/load-$port.log 2>&1
  echo "[${v:-defaults}] load rc $? ($(el) s)" >> $R
  grep -v "^json" $L/load-$port.log | sed "s/^/[${v:-defaults}] /" >> $R
  kill -TERM $pid; wait $pid
done
# Nsight Compute on one 64 x 1k call of each warp kind (what bounds them: DRAM, issue, occupancy).
for kind in warp warp_km; do
  [ $(el) -lt ${NCU_UNTIL:-480} ] || break
  (cd build && KERN_DECODE_ONCE_KIND=$kind timeout 90 ncu --clock-control none --set full -k regex:"kern_attn_decode_${kind}_partial_hd128\$" \
    --launch-skip 1 -c 1 -o /tmp/ncu-$kind $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $L/ncu-$kind.log 2>&1)
  echo "ncu $kind rc $? ($(el) s)" >> $R
  ncu --import /tmp/ncu-$kind.ncu-rep --page details > $L/ncu-$kind.txt 2>&1
  grep -E "^    (Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Registers Per Thread|Executed Instructions )" $L/ncu-$kind.txt | sed "s/^/$kind /" >> $R
done
echo "total $(el) s" >> $R
cat $R
