#!/usr/bin/env bash
# Session 14, device round 1: sampling kernel (staged slice) checks + timing + ncu, the GPU suite,
# the HF gate (tiny, default), and the fuzz campaigns on the spare CPU cores.
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz && tar -xJf .devrun/fuzz.txz -C .devrun
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/machine.txt"; nproc >> "$out/machine.txt"
# fuzz campaigns in the background (ASan + UBSan builds), 12 workers
mkdir -p /tmp/fz
fuzz() {  # name workers seconds
  local n=$1 w=$2 s=$3 c=/tmp/fz/corpus-$1
  mkdir -p $c && cp -r tests/fuzz/corpus/$n/. $c/
  (cd /tmp/fz && timeout $((s + 60)) "$root/.devrun/fuzz/fuzz_$n" -fork=$w -max_total_time=$s -max_len=65536 -timeout=10 \
     -rss_limit_mb=4096 $c > /tmp/fz/$n.log 2>&1; echo "rc $?" >> /tmp/fz/$n.log) &
}
fuzz jinja 9 ${FZ_S:-470}; fuzz tool_call 3 ${FZ_S:-470}; fuzz tokenizer_json 3 ${FZ_S:-470}
K=build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
timeout 30 $K --gtest_filter='PerfGpu.Sample' > "$out/perf.log" 2>&1; echo "perf rc $?"
grep -iE "sample|argmax|copy" "$out/perf.log" | grep -v "^\[" | head -20
ncu_one() {  # skip tag
  timeout 60 ncu --clock-control none -k kern_sample_bf16 -s $1 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters \
    $K --gtest_filter=PerfGpu.Sample > "$out/ncu-$2.txt" 2>&1; echo "ncu $2 rc $?"
  grep -E "Duration|Registers Per|Achieved Occ|Warp Cycles Per Issued|Issued Warp|Stall|No Eligible" "$out/ncu-$2.txt" | head -12
}
ncu_one 440 topk-topp-b1
bash scripts/setup-tokenizer.sh > "$out/setup-tokenizer.log" 2>&1; echo "tokenizer rc $?"
echo "before suite: $(( $(date +%s) - t0 )) s"
SKIP_SUITE=0 SUITE_TIMEOUT=200 GATE_TIMEOUT=150 timeout 380 bash scripts/dev/check.sh build "$out" "tiny default" 2>&1 | tail -25
echo "after gate: $(( $(date +%s) - t0 )) s"
wait
for n in jinja tool_call tokenizer_json; do echo "== fuzz $n"; grep -E "^#[0-9]+" /tmp/fz/$n.log | tail -1; grep -E "crash|ERROR|rc " /tmp/fz/$n.log | tail -3; done | tee "$out/fuzz-summary.txt"
tar -czf "$out/fuzz-logs.tgz" -C /tmp/fz jinja.log tool_call.log tokenizer_json.log corpus-jinja corpus-tool_call corpus-tokenizer_json
echo "total $(( $(date +%s) - t0 )) s"
