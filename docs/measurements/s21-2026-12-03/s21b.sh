#!/usr/bin/env bash
# Session 21, device round 2: the decode partials' tile copy rewritten (one page lookup and one
# address per tile, TileCopy): the attention tests against the float64 reference and the length-only
# sweep, Nsight Compute on the warp kernel again; the cuBLASLt candidates (now up to m = 2048); the
# sampling op's forced rows; the HTTP GPU tests through scripts/gpu-tests.sh (ServeGpu: greedy vs
# kern run, the host tier, prompt log-probs against transformers); kern bench --batches with RoPE
# at one row per block; kern serve at concurrency 1 and 64.
set -u
out=$1
t0=$(date +%s)
L=/tmp/logs
R=$L/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs $L
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R
K=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 150 $K --gtest_filter='AttnDecodeGpu.*:SampleGpu.ForcedTokensGiveTheirLogprobs:PerfGpu.DecodeAttentionLengthOnlySplit' > $L/attn.log 2>&1; echo "attn tests rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "OK \]|FAILED|us per layer|memcpy" $L/attn.log | grep -v "rel err" >> $R
timeout 90 ncu --clock-control none --set full -k regex:kern_attn_decode_ --launch-skip 2 -c 1 $K --gtest_filter=PerfGpu.DecodeAttentionWarp64x1kOnce > $L/ncu-warp.txt 2>&1; echo "ncu rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Warp Cycles Per Issued|Executed Instructions  |Registers Per" $L/ncu-warp.txt | head -12 >> $R
timeout 150 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter=PerfGpuGemm.DecodeCandidatesAcrossBatchSizes > $L/gemm-cand.log 2>&1; echo "gemm candidates rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[cand\]|FAILED|OK \]" $L/gemm-cand.log | sed 's/ (heuristic at m=[0-9]*, candidate [0-9]*)//' >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1; echo "tokenizer rc $?" >> $R
KERN_CTEST_ARGS="-R ServeGpu" timeout 200 bash scripts/gpu-tests.sh build $L/serve-ctest.log > /dev/null 2>&1; echo "serve ctest rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "Test +#|gpu suite|\[prompt-logprobs\]|\[host-tier\]|\[serve-vs-run\]" $L/serve-ctest.log | tail -14 >> $R
timeout 120 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $L/synth.log 2>&1; echo "synth rc $? ($(( $(date +%s) - t0 )) s)" >> $R
timeout 150 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-peer --no-startup --no-pool --contexts 1024 --prefill 1024 --batches 1,8,64,256 --batch-context 1024 --json $L/bench.json > $L/bench.txt 2> $L/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
sed -n '/^decode at batch B/,/^prefill/p' $L/bench.txt | grep -E "^ +[0-9]|attn_decode|qk_norm|rms_norm|decode_" >> $R
copy=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['ceilings']['copy_gbps'])" 2>/dev/null || echo 4240)
pre=$(python3 -c "import json;print(json.load(open('$L/bench.json'))['prefill'][0]['tokens_per_s'])" 2>/dev/null || echo 54000)
echo "ceilings: copy $copy GB/s, prefill 1024 $pre tok/s" >> $R
build/bin/kern serve --weights /tmp/m4b --kernels build/kernels --port 8041 --max-seqs 256 > $L/serve.out 2> $L/serve.err &
pid=$!
for i in $(seq 1 240); do curl -sf localhost:8041/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
echo "server ready after $(( $(date +%s) - t0 )) s" >> $R
timeout 100 python3 bench/serve_load.py --url http://127.0.0.1:8041 --model m4b --model-dir /tmp/m4b --copy-gbps $copy --prefill-tok-s $pre --input-len 1024 --output-len 128 --concurrency 1 64 > $L/load.log 2>&1; echo "load rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -v "^json" $L/load.log >> $R
kill -TERM $pid; wait $pid; echo "server exit $?" >> $R
echo "total $(( $(date +%s) - t0 )) s" >> $R
tar -C /tmp -czf $out/logs.tgz logs
cat $R
