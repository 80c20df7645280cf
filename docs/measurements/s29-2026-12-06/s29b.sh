#!/usr/bin/env bash
# Session 29, device round 2: (1) the HF gate on 8b-l4 (head_dim 128: kern gen's wgmma default; round 1
# ran it without the tokenizer set up); (2) the warp-specialised variants bitwise against the
# two-warpgroup kernel (wso new: products overlapping the softmax); (3) PerfGpu.PrefillMma; (4) Nsight
# Compute on the 8k chunk for wgmma, ws and wso (details and per-instruction SASS counters).
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29b.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
K=build/tests/gpu/kernels/kern_kernels_gpu_test
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt; cat $out/machine.txt
t0=$(date +%s)
timeout 60 $K --gtest_filter='AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad' > $out/ws-check.log 2>&1
echo "ws check rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  |Failure|Expected|which is" $out/ws-check.log | head -20
t0=$(date +%s)
timeout 100 $K --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' | head -40
t0=$(date +%s)
SKIP_SUITE=1 GATE_TIMEOUT=150 timeout 200 bash scripts/dev/check.sh build $out/chk "8b-l4" > $out/check.log 2>&1
echo "gate rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "gate exit|PASS|FAIL|mean|p99" $out/check.log | tail -8
for v in wgmma wgmma_ws wgmma_wso; do
  t0=$(date +%s)
  timeout 100 ncu --clock-control none --set full -k regex:"kern_attn_prefill_${v}_hd128\$" --launch-skip 3 -c 1 \
    -o $out/ncu-$v $K --gtest_filter=PerfGpu.PrefillWgmma8k > $out/ncu-$v.log 2>&1
  echo "ncu $v rc $? ($(( $(date +%s) - t0 )) s)"
  ncu --import $out/ncu-$v.ncu-rep --page details > $out/ncu-$v.txt 2>&1
  ncu --import $out/ncu-$v.ncu-rep --page source --csv --print-source sass > $out/ncu-$v-sass.csv 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|L2 Cache Throughput|DRAM Throughput" $out/ncu-$v.txt | head -12
  rm -f $out/ncu-$v.ncu-rep
done
