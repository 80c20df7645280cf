#!/usr/bin/env bash
# Session 29, device round 9 (the final tree): kern gen launches the warp-specialised prefill attention
# (ws) below --prefill-long-rows (4,096) and its three-warpgroup form (ws3) from there. Kernel checks
# (float64; ws3 bitwise ws; row invariance), PerfGpu.PrefillMma, the HF gate on 8b-l4 (head_dim 128),
# the catalogue / pipeline / serve GPU tests, kern bench on the 4B shape: default, --prefill-long-rows 0
# (ws at every size) and --prefill-attn-mma, in one call.
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29i.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
T=build/tests/gpu/kernels/kern_kernels_gpu_test
R=$out/results.log
bash scripts/setup-tokenizer.sh > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R
t0=$(date +%s)
timeout 100 $T --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad:AttentionPrefillMmaGpu.Repeatable:AttentionPrefillMmaGpu.RowInvariance*' > $out/check.log 2>&1
echo "checks rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^\[  |Failure|Expected|which is" $out/check.log | head -20 >> $R
for v in wgmma_ws wgmma_ws3; do
  grep "${v} rel err" $out/check.log | awk '{print $NF}' | sort -g | sed -n '1p;$p' | tr '\n' ' ' | sed "s/^/$v rel err min max: /" >> $R; echo >> $R
done
timeout 60 $T --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $?" >> $R; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $R
t0=$(date +%s)
SKIP_SUITE=1 GATE_TIMEOUT=140 timeout 150 bash scripts/dev/check.sh build $out/chk "8b-l4" > $out/gate.out 2>&1
echo "gate rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "gate exit|PASS|FAIL|mean" $out/gate.out | tail -4 >> $R
t0=$(date +%s)
KERN_CTEST_ARGS="-R (KernelCatalogueGpu|PipelineGpu|ServeGpu)" timeout 80 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s)" >> $R; tail -1 $out/suite.out >> $R
$k synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
for a in "" "--prefill-long-rows 0" --prefill-attn-mma; do
  n=$(echo "${a:-default}" | tr -d ' -')
  timeout 80 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048,8192 $a --json $out/bench-$n.json > $out/bench-$n.txt 2>&1
  echo "bench ${a:-default} rc $?" >> $R; grep -E "^bench: (decode at 1024|prefill [0-9]+ / chunk [0-9]+:)|attn_prefill" $out/bench-$n.txt | head -10 >> $R
done
cat $R
