#!/usr/bin/env bash
# Session 39, device call 3: the logit bias on the GPU (the sampling tests, with the new bias cases,
# and ServeGpu.HttpGreedyEqualsKernRun with its logit_bias requests against kern run --logit-bias),
# then what s39b.sh does: on an H200 issue 17's load table (s37c.sh), on an H100 the whole GPU suite;
# on either kern serve at concurrency 1 and 8 with --max-seqs 64 against the new default 256.
# Run (carry [".devrun"]): bash docs/measurements/s39-2026-12-07/s39c.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
R=$out/results.log; L=/tmp/logs39c; mkdir -p $L
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $R
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
if echo "$gpu" | grep -q H200; then
  (cd build && KERN_KERNELS_DIR=$root/build/kernels timeout 150 tests/gpu/kernels/kern_kernels_gpu_test \
     --gtest_filter='SampleGpu*:KernelCatalogueGpu*' > $out/sample-tests.log 2>&1)
  echo "sample tests rc $? ($(el) s)" >> $R
  grep -E "^\[  (PASSED|FAILED) |tests ran|FAILED  \]" $out/sample-tests.log | head -12 >> $R
  grep -E "chi-square\] .*bias" $out/sample-tests.log >> $R
  bash scripts/setup-tokenizer.sh > $L/setup-tokenizer.log 2>&1
  KERN_CTEST_ARGS='-R ServeGpu.HttpGreedy' timeout 150 scripts/gpu-tests.sh build $out/serve-tests.log > /dev/null 2>&1
  echo "serve http test rc $? ($(el) s)" >> $R
  tail -1 $out/serve-tests.log >> $R
  grep -E "serve-vs-run" $out/serve-tests.log | head -12 >> $R
  # round 1 made the directory only after s37c.sh, which writes into it: its outputs were lost (the
  # logs were fetched from the machine's /tmp/logs37c in round 2, and round 4 ran the table again)
  mkdir -p $out/s37c
  timeout 300 bash docs/measurements/s37-2026-12-07/s37c.sh $out/s37c > /dev/null 2>&1
  cat $out/s37c/results.log >> $R 2>/dev/null
else
  timeout 420 scripts/gpu-tests.sh build $out/gpu-suite.log > /dev/null 2>&1
  echo "suite rc $? ($(el) s)" >> $R
  tail -1 $out/gpu-suite.log >> $R
  grep -E "^\s*[0-9]+ - |\*\*\*Failed|serve-vs-run\] logit|chi-square\] .*bias" $out/gpu-suite.log | head -20 >> $R
  timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(el) s)" >> $R
fi
for ms in 64 default; do
  [ $(el) -gt 500 ] && { echo "max-seqs $ms: no time left ($(el) s)" >> $R; continue; }
  extra=(); [ $ms = default ] || extra=(--max-seqs $ms)
  port=$((8090 + ${#extra[@]}))
  KERN_LOG=info build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $port "${extra[@]}" > $L/serve-$ms.out 2> $L/serve-$ms.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server --max-seqs $ms ready after $(el) s" >> $R
  timeout 60 python3 bench/serve_load.py --url http://127.0.0.1:$port --model m4b --model-dir /tmp/m4b --copy-gbps 4000 --prefill-tok-s 60000 --input-len 1024 --output-len 128 --concurrency 1 8 > $L/load-$ms.log 2>&1
  echo "load --max-seqs $ms rc $? ($(el) s)" >> $R
  grep -v "^json" $L/load-$ms.log | sed "s/^/[max-seqs $ms] /" >> $R
  kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
  grep -E "\[error\]" $L/serve-$ms.err | tail -3 >> $R
done
echo "total $(el) s" >> $R
cat $R
