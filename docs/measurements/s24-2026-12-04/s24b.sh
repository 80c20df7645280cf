#!/usr/bin/env bash
# Session 24, device round 2: kern capture after the InitializeInjection fix (its GPU test run
# directly, then the 4B peer's decode with and without capture, its modules landed), the sampling
# op's threshold ranking v2 (segment keys, radix tau), the host-state GPU tests. One log.
set -u
out=$1
log=$out/round2.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=build/bin/kern
echo "== capture GPU test (the device's libcupti)"
timeout 150 python3 tests/gpu/capture/capture_test.py $root/$k $root/build/kernels $root/assets/default-model /tmp/capwork $root > $out/capture-test.txt 2>&1; echo "capture test rc $?"
grep -E "^(ok|FAIL)|capture test:|modules, |graph [0-9]|^kern capture" $out/capture-test.txt | head -40
echo "== the 4B peer, decode at 1k, plain and captured"
$k synth qwen3 --preset 4b --no-tokenizer -o /tmp/m4b > /dev/null 2>&1
peer="python3 bench/torch_peer.py --config /tmp/m4b/config.json --contexts 1024 --prefill 512 --replays 300 --reps 3"
for i in 1 2; do
  timeout 100 $peer --json /tmp/peer-plain-$i.json > /tmp/peer-plain-$i.log 2>&1
  rm -rf /tmp/cap4b
  timeout 100 $k capture -o /tmp/cap4b -- $peer --json /tmp/peer-cap-$i.json > /tmp/peer-cap-$i.txt 2> /tmp/peer-cap-$i.err
  echo "capture $i rc $?"; tail -2 /tmp/peer-cap-$i.err
done
python3 - <<'PY'
import json
for i in (1, 2):
    for kind in ("plain", "cap"):
        try:
            d = json.load(open(f"/tmp/peer-{kind}-{i}.json"))
            print(kind, i, [(x["context"], round(x["gpu_step_us"], 1)) for x in d["decode"]],
                  [(x["tokens"], round(x["tokens_per_s"])) for x in d["prefill"]])
        except Exception as e:
            print(kind, i, "no report:", e)
PY
cat /tmp/peer-cap-2.txt | head -45
cp /tmp/cap4b/capture.jsonl $out/peer4b-capture.jsonl
echo "modules: $(ls /tmp/cap4b/modules | wc -l), $(du -sh /tmp/cap4b/modules | cut -f1)"
$k kernels --kernels /tmp/landed4b /tmp/cap4b/modules/* > /tmp/landed.txt 2>&1; echo "kern kernels rc $? landed $(grep -c '^landed' /tmp/landed.txt)"
$k kernels --kernels /tmp/landed4b 2>/dev/null | wc -l
echo "== sampling"
timeout 200 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='*SampleGpu*:*SampleChiSquare*' > /tmp/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/sample-tests.log | head -20
grep -B2 -A12 "Failure" /tmp/sample-tests.log | head -80
timeout 60 build/tests/gpu/kernels/kern_catalogue_gpu_test > /tmp/catalogue.log 2>&1; echo "catalogue rc $?"; tail -1 /tmp/catalogue.log
timeout 120 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/perf-sample.log 2>&1; echo "perf rc $?"
grep "figure" /tmp/perf-sample.log | grep -v "cluster kernel alone"
echo "== host states"
timeout 120 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuHostState.*:RuntimeGpuWeights.*' > /tmp/hs.log 2>&1; echo "host-state tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" -A3 /tmp/hs.log | head -40
echo "== GEMM externs"
timeout 150 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='RuntimeGpuGemmExtern*:RuntimeGpuFailures.UnsupportedExternIsRejectedAtLoad:RuntimeGpuGemm*:RuntimeGpuGraph*' > /tmp/ext.log 2>&1; echo "extern tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|figure" /tmp/ext.log | head -40
grep -B3 -A10 "Failure" /tmp/ext.log | head -60
