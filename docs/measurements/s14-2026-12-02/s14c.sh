#!/usr/bin/env bash
# Session 14, device round 3: the sampling kernel with log-depth block reductions (checks, timing),
# and one fresh fuzz campaign each for the tool-call parser and tokenizer.json (7 workers each).
set -u
out=$1
t0=$(date +%s)
R=$out/results.log
tar -xJf .devrun/pack.txz && tar -xJf .devrun/fuzz.txz -C .devrun && mkdir -p /tmp/fz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R
fuzz() {  # name workers seconds
  local n=$1 w=$2 s=$3 c=/tmp/fz/corpus-$1
  mkdir -p $c && cp -r tests/fuzz/corpus/$n/. $c/
  (cd /tmp/fz && timeout $((s + 60)) "$root/.devrun/fuzz/fuzz_$n" -fork=$w -max_total_time=$s -max_len=65536 -timeout=10 \
     -rss_limit_mb=4096 $c > /tmp/fz/$n.log 2>&1; echo "rc $?" >> /tmp/fz/$n.log) &
}
fuzz tool_call 7 ${FZ_S:-400}; fuzz tokenizer_json 7 ${FZ_S:-400}
K=build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
timeout 100 $K --gtest_filter='SampleGpu*:*SampleChiSquare*:ArgmaxGpu*' > "$out/sample.log" 2>&1; echo "sample rc $? ($(( $(date +%s) - t0 )) s)" >> $R
grep -E "^\[  (PASSED|FAILED) |FAILED" "$out/sample.log" | tail -8 >> $R
for i in 1 2; do timeout 40 $K --gtest_filter='PerfGpu.Sample' > "$out/perf$i.log" 2>&1; echo "perf$i rc $?" >> $R; done
grep -h "figure" "$out/perf1.log" "$out/perf2.log" >> $R
wait
for n in tool_call tokenizer_json; do echo "== fuzz $n"; grep -E "^#[0-9]+" /tmp/fz/$n.log | tail -1; grep -E "crash|ERROR|rc " /tmp/fz/$n.log | tail -3; done >> $R
tar -czf "$out/fuzz-logs.tgz" -C /tmp fz/tool_call.log fz/tokenizer_json.log
echo "total $(( $(date +%s) - t0 )) s" >> $R
cat $R
