#!/usr/bin/env bash
# Session 14, device round 2: the 1024-thread sampling kernel (checks, timing), kern run on the
# default model (greedy, --chat with a seed twice, eager vs graph, log-probs), the whole GPU suite,
# the HF gate on tiny; the tool-call and tokenizer.json fuzz campaigns continue from round 1's corpus.
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && tar -xJf .devrun/fuzz.txz -C .devrun && mkdir -p /tmp/fz && tar -xzf .devrun/fzcorpus.tgz -C /tmp/fz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R
fuzz() {  # name workers seconds
  local n=$1 w=$2 s=$3 c=/tmp/fz/corpus-$1
  (cd /tmp/fz && timeout $((s + 60)) "$root/.devrun/fuzz/fuzz_$n" -fork=$w -max_total_time=$s -max_len=65536 -timeout=10 \
     -rss_limit_mb=4096 $c > /tmp/fz/$n.log 2>&1; echo "rc $?" >> /tmp/fz/$n.log) &
}
fuzz tool_call 2 ${FZ_S:-470}; fuzz tokenizer_json 2 ${FZ_S:-470}
K=build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
timeout 100 $K --gtest_filter='SampleGpu*:*SampleChiSquare*:ArgmaxGpu*' > "$out/sample.log" 2>&1; echo "sample rc $? ($(( $(date +%s) - t0 )) s)" | tee -a $R
grep -E "^\[  (PASSED|FAILED) |FAILED|chi" "$out/sample.log" | tail -25 >> $R
timeout 40 $K --gtest_filter='PerfGpu.Sample' > "$out/perf.log" 2>&1; echo "perf rc $?" | tee -a $R
grep -iE "us|ceiling" "$out/perf.log" | grep -v "^\[\|Note:" | head -30 >> $R
# kern run on the default model through the sample op
m=/tmp/dm; mkdir -p $m /tmp/runs
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $m/
build/bin/kern gen qwen3 $m -o $m/manifest.json --kernels-dir build/kernels > /tmp/runs/gen.log 2>&1; echo "gen rc $?" | tee -a $R
run() { timeout 30 build/bin/kern run --manifest $m/manifest.json --kernels build/kernels --weights $m --tokenizer $m/tokenizer.json "$@"; }
run --prompt "The capital of France is" --steps 40 > /tmp/runs/greedy.txt 2> /tmp/runs/greedy.err; echo "greedy rc $?" | tee -a $R
for i in 1 2; do run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 > /tmp/runs/chat$i.txt 2> /tmp/runs/chat$i.err; echo "chat$i rc $?" >> $R; done
cmp /tmp/runs/chat1.txt /tmp/runs/chat2.txt && echo "chat: same text twice" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 1 --steps 60 --eager > /tmp/runs/chat_eager.txt 2> /tmp/runs/chat_eager.err
cmp /tmp/runs/chat1.txt /tmp/runs/chat_eager.txt && echo "chat: eager = graph" >> $R
run --chat --prompt "Tell me about the old city." --temperature 0.7 --seed 2 --steps 60 > /tmp/runs/chat_seed2.txt 2>&1
cmp -s /tmp/runs/chat1.txt /tmp/runs/chat_seed2.txt || echo "chat: seed 2 differs" >> $R
run --prompt "The capital of France is" --steps 6 --logprobs 3 --temperature 0.9 --top-k 40 --top-p 0.9 --min-p 0.02 --repetition-penalty 1.2 --seed 5 > /tmp/runs/lp.txt 2> /tmp/runs/lp.err; echo "lp rc $?" >> $R
{ echo "--- greedy"; cat /tmp/runs/greedy.txt; echo "--- chat1"; cat /tmp/runs/chat1.txt; echo "--- lp"; grep logprob /tmp/runs/lp.err | head -6; grep -hE "generated|step program|ms/token" /tmp/runs/greedy.err /tmp/runs/chat1.err | head -6; } >> $R
echo "before suite: $(( $(date +%s) - t0 )) s" >> $R
bash scripts/setup-tokenizer.sh > /tmp/runs/setup-tokenizer.log 2>&1
SUITE_TIMEOUT=300 GATE_TIMEOUT=120 timeout 440 bash scripts/dev/check.sh build /tmp/chk "tiny" > /tmp/runs/check.out 2>&1
cp /tmp/chk/gpu-tests.log "$out/gpu-tests.log"; tail -22 /tmp/runs/check.out >> $R
echo "after gate: $(( $(date +%s) - t0 )) s" >> $R
wait
for n in tool_call tokenizer_json; do echo "== fuzz $n"; grep -E "^#[0-9]+" /tmp/fz/$n.log | tail -1; grep -E "crash|ERROR|rc " /tmp/fz/$n.log | tail -3; done >> $R
tar -czf "$out/aux.tgz" -C /tmp fz/tool_call.log fz/tokenizer_json.log runs chk/gate-report.json chk/gate.log 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
