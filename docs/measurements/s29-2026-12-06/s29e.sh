#!/usr/bin/env bash
# Session 29, device round 5: the warp-specialised wgmma prefill attention as kern gen's default
# (kern_attn_prefill_wgmma_ws_hd128). Kernel checks (float64, bitwise, row invariance) and timings; the HF
# gate on tiny, default and 8b-l4 (head_dim 128: the new kernel); the catalogue, pipeline and serve GPU tests;
# kern bench on the 4B shape, prefill 2,048 / 8,192 and decode 1k, with and without --prefill-attn-mma
# (no peer).
# Run (carry [".devrun"]): bash docs/measurements/s29-2026-12-06/s29e.sh $OUT
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
timeout 150 $T --gtest_filter='AttentionPrefillMmaGpu.VariantsWgmma:AttentionPrefillMmaGpu.WarpSpecialisedBitwiseUnderLoad:AttentionPrefillMmaGpu.Repeatable:AttentionPrefillMmaGpu.RowInvariance*' > $out/check.log 2>&1
echo "checks rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "^\[  |Failure|Expected|which is" $out/check.log | head -20 >> $R
grep "wgmma_ws rel err" $out/check.log | awk '{print $NF}' | sort -g | sed -n '1p;$p' | tr '\n' ' ' | sed 's/^/ws rel err min max: /' >> $R; echo >> $R
timeout 100 $T --gtest_filter='PerfGpu.PrefillMma' > $out/perf.log 2>&1
echo "perf rc $?" >> $R; grep -E "TFLOP/s" $out/perf.log | grep -E "wgmma|mma_s2 " | sed 's/^.*prefill attn //' >> $R
t0=$(date +%s)
SKIP_SUITE=1 GATE_TIMEOUT=260 timeout 280 bash scripts/dev/check.sh build $out/chk "tiny default 8b-l4" > $out/gate.out 2>&1
echo "gate rc $? ($(( $(date +%s) - t0 )) s)" >> $R; grep -E "gate exit|PASS|FAIL|mean" $out/gate.out | tail -8 >> $R
t0=$(date +%s)
KERN_CTEST_ARGS="-R (KernelCatalogueGpu|PipelineGpu|ServeGpu)" timeout 150 bash scripts/gpu-tests.sh build $out/suite.log > $out/suite.out 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s)" >> $R; tail -2 $out/suite.out >> $R
$k synth qwen3 --preset 4b -o /tmp/m4b > /dev/null 2>&1
for a in "" --prefill-attn-mma; do
  timeout 150 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048,8192 $a --json $out/bench${a:-ws}.json > $out/bench${a:-ws}.txt 2>&1
  echo "bench ${a:-ws} rc $?" >> $R; grep -iE "prefill|attn|decode" $out/bench${a:-ws}.txt | head -16 >> $R
done
cat $R
