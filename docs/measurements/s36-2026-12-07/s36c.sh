#!/usr/bin/env bash
# Session 36, device round 3 (the warm H200 of rounds 1-2): issue 17's load table with kern serve
# --gemm-per-m (decode GEMMs with one result per m instead of one algorithm), then as much of the
# GPU suite (less the PerfGpu timings and the candidates sweep) as the time left allows.
# Run (carry [".devrun"]): bash docs/measurements/s36-2026-12-07/s36c.sh $OUT [seconds, 540]
set -u
out=$1
limit=${2:-540}
t0=$(date +%s)
L=/tmp/logs36c
R=$out/results.log
mkdir -p $L
[ -x build/bin/kern ] || tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
[ -f /tmp/m4b/config.json ] || timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1
copy=4230.26; pre=69519.09  # round 1's ceilings (this machine, kern bench in s30f.sh)
KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port 8074 --max-seqs 256 --gemm-per-m > $L/serve.out 2> $L/serve.err &
pid=$!
for i in $(seq 1 240); do curl -sf localhost:8074/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
echo "server --gemm-per-m ready after $(( $(date +%s) - t0 )) s" >> $R
timeout 150 python3 bench/serve_load.py --url http://127.0.0.1:8074 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 8 64 256 > $L/load.log 2>&1
echo "load rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -v "^json" $L/load.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R; grep -E "\[(error|warning)\]" $L/serve.err | tail -5 >> $R
t=$(( limit - ($(date +%s) - t0) ))
if [ $t -gt 60 ]; then
  KERN_CTEST_ARGS="-E (PerfGpu\.|PerfGpuGemm\.Decode|TensorParallelGpu)" timeout $t bash scripts/gpu-tests.sh build $out/gpu-tests.log > $L/suite.out 2>&1
  echo "suite rc $? ($(( $(date +%s) - t0 )) s): $(tail -1 $L/suite.out)" >> $R
  grep -E "\*\*\*Failed|Timeout|\*\*\*Exception" $out/gpu-tests.log | head -10 >> $R
fi
cat $R
