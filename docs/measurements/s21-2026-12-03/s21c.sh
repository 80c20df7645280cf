#!/usr/bin/env bash
# Session 21, device round 3 (the committed tree: TileCopy, the warp partial at 2 stages and 3 blocks
# per SM, RoPE one row per block, prompt log-probs): the decode attention tests and the sampling op's
# forced rows, the HTTP GPU tests (ServeGpu, through gpu-tests.sh), ceilings and kern bench --batches,
# then kern serve --max-seqs 256 (defaults) under the whole load table (concurrency 1 / 8 / 32 / 64 /
# 128 / 256, a Poisson run, the 14k-token prefix run), --no-batch-invariant at 1 and 64 (the
# invariance cost), and the 2-minute soak of 256 streams with random disconnects.
set -u
out=$1
t0=$(date +%s)
L=/tmp/logs
R=$out/results.log  # written as it goes: what ran comes back even if the call is cut
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs $L
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
K=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 60 $K --gtest_filter='AttnDecodeGpu.*:SampleGpu.ForcedTokensGiveTheirLogprobs' > $L/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "FAILED|PASSED" $L/attn.log >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
KERN_CTEST_ARGS="-R ServeGpu" timeout 150 bash scripts/gpu-tests.sh build $L/serve-ctest.log > /dev/null 2>&1; echo "serve ctest rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "Test +#|gpu suite|\[prompt-logprobs\]|\[host-tier\]" $L/serve-ctest.log | tail -10 >> $R
pkill -f "bin/kern serve" 2>/dev/null; sleep 1; nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^prefill/p' $L/bench.txt | grep -E "^ +[0-9]|attn_decode|qk_norm|rms_norm|decode_" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4240)
pre=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['prefill'][0]['tokens_per_s'])" 2>/dev/null || echo 54000)
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
serve() {  # serve PORT EXTRA... ; sets pid
  build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port $1 --max-seqs 256 "${@:2}" > $L/serve-$1.out 2> $L/serve-$1.err &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$1/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  echo "server :$1 ${*:2} ready after $(( $(date +%s) - t0 )) s" >> $R
}
load() {  # load PORT LOG ARGS...
  timeout "${T:-300}" python3 bench/serve_load.py --url http://127.0.0.1:$1 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 "${@:3}" > $L/$2.log 2>&1; echo "load $2 rc $? ($(( $(date +%s) - t0 )) s)" >> $R
  grep -v "^json" $L/$2.log >> $R
}
serve 8041
T=240 load 8041 load-table --concurrency 1 8 32 64 128 256 --rate 16 --prefix-test 14000
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
serve 8042 --no-batch-invariant
T=100 load 8042 load-noinv --concurrency 1 64
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
serve 8043 --no-prefix-cache
timeout 150 python3 tests/gpu/serve/soak.py http://127.0.0.1:8043 m4b 120 256 > $L/soak.log 2>&1; echo "soak rc $? ($(( $(date +%s) - t0 )) s)" >> $R
tail -5 $L/soak.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
