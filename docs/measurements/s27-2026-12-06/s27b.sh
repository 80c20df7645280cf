#!/usr/bin/env bash
# Session 27, device round 2: the HF gate (tiny, default), kern test fp8 against bf16 (default model and
# the 4B shape), decode / prefill figures of bf16 and fp8 on the 4B shape (kern bench, no peer).
# Run (carry [".devrun"]): bash docs/measurements/s27-2026-12-06/s27b.sh $OUT
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
K=$root/build/kernels
export KERN_KERNELS_DIR=$K
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/machine.txt
SKIP_SUITE=1 GATE_TIMEOUT=150 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
grep -E "gate exit|PASS|FAIL" $out/check.log | tail -6
# kern test's and the fp8 path's GPU tests with their output (the suite's log keeps only failures'),
# the externs against float64 (relative errors), the quant kernels after the subnormal-bound fix
timeout 120 python3 tests/gpu/abtest/ab_test.py $k $K assets/default-model /tmp/abw > $out/abtest.log 2>&1; echo "abtest rc $?"
grep -E "^(ok|FAIL) " $out/abtest.log
timeout 120 python3 tests/gpu/fp8/fp8_run_test.py $k $K assets/default-model /tmp/fp8w > $out/fp8run.log 2>&1; echo "fp8run rc $?"; tail -8 $out/fp8run.log
timeout 120 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuGemmExtern*' > $out/externs.log 2>&1; echo "externs rc $? $(tail -1 $out/externs.log)"
grep -iE "rel" $out/externs.log | head -16
timeout 60 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='Quant*' > $out/quant.log 2>&1; echo "quant rc $? $(tail -1 $out/quant.log)"
$k synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1
for m in assets/default-model /tmp/m4b; do
  n=$(basename $m)
  $k gen qwen3 $m --kernels-dir $K --logits-output -o /tmp/$n-bf16.json > /dev/null 2>> $out/gen.err
  $k gen qwen3 $m --kernels-dir $K --logits-output --fp8 -o /tmp/$n-fp8.json > /dev/null 2>> $out/gen.err
  timeout 150 $k test /tmp/$n-fp8.json --reference /tmp/$n-bf16.json --weights $m --kernels $K --json $out/kt-fp8-$n.json > $out/kt-fp8-$n.txt 2> $out/kt-fp8-$n.err
  echo "kern test fp8 vs bf16 ($n) rc $?"; head -14 $out/kt-fp8-$n.txt; grep -i "shared" $out/kt-fp8-$n.err | head -2
done
for v in "" --fp8; do
  timeout 170 $k bench --weights /tmp/m4b --kernels $K --no-peer --no-startup --no-pool --contexts 1024 --prefill 2048 $v --json $out/bench${v:-bf16}.json > $out/bench${v:-bf16}.txt 2>&1
  echo "bench ${v:-bf16} rc $?"; grep -iE "decode|prefill|floor|ceiling|copy" $out/bench${v:-bf16}.txt | head -14
done
