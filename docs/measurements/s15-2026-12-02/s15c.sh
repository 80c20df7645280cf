#!/usr/bin/env bash
# Session 15, device round 3: the race kernel back at 8 tokens per thread (75 CTAs per row) with
# round 2's folds, one cluster per row again (checks, timing of the op and each kernel alone);
# kern run on the default model (greedy; --chat with a seed twice; eager vs graph; min-p; log-probs).
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R
K=build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
timeout 200 $K --gtest_filter='SampleGpu*:*SampleChiSquare*:ArgmaxGpu*' > "$out/sample.log" 2>&1; echo "sample rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |FAILED|chi-square" "$out/sample.log" | tail -40 >> $R
for i in 1 2; do timeout 60 $K --gtest_filter='PerfGpu.Sample' > "$out/perf$i.log" 2>&1; echo "perf$i rc $?" >> $R; done
grep -h "figure" "$out/perf1.log" "$out/perf2.log" >> $R
m=/tmp/dm; mkdir -p $m
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $m/
build/bin/kern gen qwen3 $m -o $m/manifest.json --kernels-dir build/kernels > /tmp/runs/gen.log 2>&1; echo "gen rc $?" >> $R
run() { timeout 30 build/bin/kern run --manifest $m/manifest.json --kernels build/kernels --weights $m --tokenizer $m/tokenizer.json "$@"; }
run --prompt "The capital of France is" --steps 40 > /tmp/runs/greedy.txt 2> /tmp/runs/greedy.err; echo "greedy rc $?" >> $R
for i in 1 2; do run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 > /tmp/runs/chat$i.txt 2> /tmp/runs/chat$i.err; echo "chat$i rc $?" >> $R; done
cmp /tmp/runs/chat1.txt /tmp/runs/chat2.txt && echo "chat: same text twice" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 --eager > /tmp/runs/chat_eager.txt 2> /tmp/runs/chat_eager.err
cmp /tmp/runs/chat1.txt /tmp/runs/chat_eager.txt && echo "chat: eager = graph" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 2 --steps 60 > /tmp/runs/chat_seed2.txt 2>&1
cmp -s /tmp/runs/chat1.txt /tmp/runs/chat_seed2.txt || echo "chat: seed 2 differs" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --min-p 0.05 --seed 1 --steps 60 > /tmp/runs/chat_minp.txt 2> /tmp/runs/chat_minp.err; echo "min-p rc $?" >> $R
run --prompt "The capital of France is" --steps 6 --logprobs 3 --temperature 0.9 --top-k 40 --top-p 0.9 --min-p 0.02 --repetition-penalty 1.2 --seed 5 > /tmp/runs/lp.txt 2> /tmp/runs/lp.err; echo "lp rc $?" >> $R
{ echo "--- greedy"; cat /tmp/runs/greedy.txt; echo "--- chat1"; cat /tmp/runs/chat1.txt; echo "--- chat min-p"; cat /tmp/runs/chat_minp.txt; echo "--- lp"; cat /tmp/runs/lp.txt; grep logprob /tmp/runs/lp.err | head -6; grep -hE "generated|step program|ms/token" /tmp/runs/greedy.err /tmp/runs/chat1.err | head -6; tail -3 /tmp/runs/greedy.err; } >> $R
tar -czf "$out/aux.tgz" -C /tmp runs 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
