#!/usr/bin/env bash
# Issue 19's GPU checks still owed (written in session 26, 2026-12-05, when no device machine was
# lent; run it in the next session that has one). From the repo root of the device copy, after
#   here: ninja -C build && bash scripts/dev/pack.sh build .devrun/pack.txz lib/libkern_capture.so
#   run (carry [".devrun"]): bash docs/measurements/s26-2026-12-05/issue19-round.sh $OUT
# ~6 min. Every log lands in $OUT; the summary lines go to stdout.
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $out/machine.txt
# 1. the compare kernels against core::compare_rows
timeout 120 build/tests/gpu/runtime/test_row_compare_gpu > $out/rowcmp.log 2>&1; echo "rowcmp rc $? $(tail -1 $out/rowcmp.log)"
# 2. the three externs against float64 (cublas_bf16_tn_f32 re-run, cublaslt_fp8_tn / _f32)
timeout 180 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuGemmExtern*' > $out/externs.log 2>&1
echo "externs rc $? $(tail -1 $out/externs.log)"; grep -E "rel|error" $out/externs.log | head -12
# 3. the quant kernels
timeout 120 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='Quant*' > $out/quant.log 2>&1; echo "quant rc $? $(tail -1 $out/quant.log)"
# 4. kern test: default vs itself, --decode-attn-f32, --decode-chain, a tampered RoPE base
timeout 300 python3 tests/gpu/abtest/ab_test.py $k $K assets/default-model /tmp/abw > $out/abtest.log 2>&1; echo "abtest rc $?"; tail -8 $out/abtest.log
# 5. the fp8 variant end to end (eager and graphs, bitwise repeats, near bf16)
timeout 300 python3 tests/gpu/fp8/fp8_run_test.py $k $K assets/default-model /tmp/fp8w > $out/fp8run.log 2>&1; echo "fp8run rc $?"; tail -6 $out/fp8run.log
# 6. kern test: fp8 against bf16 (default model and the 4B shape)
$k synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1
for m in assets/default-model /tmp/m4b; do
  n=$(basename $m)
  $k gen qwen3 $m --kernels-dir $K --logits-output -o /tmp/$n-bf16.json > /dev/null 2>&1
  $k gen qwen3 $m --kernels-dir $K --logits-output --fp8 -o /tmp/$n-fp8.json > /dev/null 2>&1
  timeout 300 $k test /tmp/$n-fp8.json --reference /tmp/$n-bf16.json --weights $m --kernels $K --json $out/kt-fp8-$n.json > $out/kt-fp8-$n.txt 2> $out/kt-fp8-$n.err
  echo "kern test fp8 vs bf16 ($n) rc $?"; head -12 $out/kt-fp8-$n.txt
done
# 7. decode step time, bf16 and fp8, 4B shape (medians beside the copy ceiling)
for v in "" --fp8; do
  timeout 400 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024,8192 --prefill 2048 $v --json $out/bench${v:-bf16}.json > $out/bench${v:-bf16}.txt 2>&1
  echo "bench ${v:-bf16} rc $?"; grep -iE "decode|prefill|floor|ceiling" $out/bench${v:-bf16}.txt | head -12
done
