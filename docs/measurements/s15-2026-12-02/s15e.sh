#!/usr/bin/env bash
# Session 15, device round 5: every paged and per-seq state in VMM arenas of the pool
# (runtime/pooled_state_memory.hpp): the whole GPU suite (vmm_test included), the HF gate on tiny
# and the default model, kern run on the default model (greedy; --chat with a seed twice; eager).
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && mkdir -p /tmp/runs
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R
m=/tmp/dm; mkdir -p $m
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $m/
build/bin/kern gen qwen3 $m -o $m/manifest.json --kernels-dir build/kernels > /tmp/runs/gen.log 2>&1; echo "gen rc $?" >> $R
run() { timeout 30 build/bin/kern run --manifest $m/manifest.json --kernels build/kernels --weights $m --tokenizer $m/tokenizer.json "$@"; }
KERN_LOG=info run --prompt "The capital of France is" --steps 40 > /tmp/runs/greedy.txt 2> /tmp/runs/greedy.err; echo "greedy rc $?" >> $R
for i in 1 2; do run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 > /tmp/runs/chat$i.txt 2> /tmp/runs/chat$i.err; echo "chat$i rc $?" >> $R; done
cmp /tmp/runs/chat1.txt /tmp/runs/chat2.txt && echo "chat: same text twice" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 --eager > /tmp/runs/chat_eager.txt 2> /tmp/runs/chat_eager.err
cmp /tmp/runs/chat1.txt /tmp/runs/chat_eager.txt && echo "chat: eager = graph" >> $R
{ echo "--- greedy"; cat /tmp/runs/greedy.txt; echo "--- chat1"; cat /tmp/runs/chat1.txt; grep -hE "state pool|generated|ms/token" /tmp/runs/greedy.err | head -4; tail -2 /tmp/runs/chat1.err; } >> $R
echo "before suite: $(( $(date +%s) - t0 )) s" >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
SUITE_TIMEOUT=250 GATE_TIMEOUT=120 timeout 380 bash scripts/dev/check.sh build /tmp/chk "tiny default" > /tmp/runs/check.out 2>&1
cp /tmp/chk/gpu-tests.log "$out/gpu-tests.log"; tail -30 /tmp/runs/check.out >> $R
echo "after gate: $(( $(date +%s) - t0 )) s" >> $R
tar -czf "$out/aux.tgz" -C /tmp runs chk/gate-report.json chk/gate.log 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
