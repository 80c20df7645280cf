#!/usr/bin/env bash
# Session 24, device round 3: kern capture with CUkernel handles resolved and --no-timing (its GPU
# test; the 4B peer plain / captured / captured without timing), the sampling op v2 with 16 KB of
# shared memory (tests, PerfGpu.Sample). One log.
set -u
out=$1
log=$out/round3.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=build/bin/kern
echo "== capture GPU test"
timeout 150 python3 tests/gpu/capture/capture_test.py $root/$k $root/build/kernels $root/assets/default-model /tmp/capwork $root > $out/capture-test.txt 2>&1; echo "capture test rc $?"
grep -E "^(ok|FAIL)|capture test:|^kern capture|exit status" $out/capture-test.txt | head -40
echo "== the 4B peer, decode at 1k: plain, captured, captured without timing (twice each)"
$k synth qwen3 --preset 4b --no-tokenizer -o /tmp/m4b > /dev/null 2>&1
peer="python3 bench/torch_peer.py --config /tmp/m4b/config.json --contexts 1024 --prefill 512 --replays 300 --reps 3"
for i in 1 2; do
  timeout 100 $peer --json /tmp/peer-plain-$i.json > /dev/null 2>&1
  rm -rf /tmp/cap4b; timeout 100 $k capture -o /tmp/cap4b -- $peer --json /tmp/peer-cap-$i.json > /tmp/peer-cap-$i.txt 2> /tmp/peer-cap-$i.err
  echo "capture $i rc $?"; grep "^kern capture" /tmp/peer-cap-$i.err
  rm -rf /tmp/cap4n; timeout 100 $k capture --no-timing -o /tmp/cap4n -- $peer --json /tmp/peer-notime-$i.json > /tmp/peer-notime-$i.txt 2> /tmp/peer-notime-$i.err
  echo "capture --no-timing $i rc $?"; grep "^kern capture" /tmp/peer-notime-$i.err
done
python3 - <<'PY'
import json
for kind in ("plain", "cap", "notime"):
    for i in (1, 2):
        try:
            d = json.load(open(f"/tmp/peer-{kind}-{i}.json"))
            print(kind, i, [(x["context"], round(x["gpu_step_us"], 1)) for x in d["decode"]])
        except Exception as e:
            print(kind, i, "no report:", e)
PY
head -32 /tmp/peer-cap-2.txt | cut -c1-180; grep "^graph" /tmp/peer-cap-2.txt /tmp/peer-notime-2.txt
cp /tmp/cap4b/capture.jsonl $out/peer4b-capture.jsonl
echo "modules: $(ls /tmp/cap4b/modules | wc -l), $(du -sh /tmp/cap4b/modules | cut -f1)"
$k kernels --kernels /tmp/landed4b /tmp/cap4b/modules/* > /tmp/landed.txt 2>&1; echo "kern kernels rc $? landed $(grep -c '^landed' /tmp/landed.txt)"
echo "== sampling"
timeout 200 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='*SampleGpu*:*SampleChiSquare*' > /tmp/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/sample-tests.log | head -20
grep -B2 -A12 "Failure" /tmp/sample-tests.log | head -60
timeout 120 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > /tmp/perf-sample.log 2>&1; echo "perf rc $?"
grep "figure" /tmp/perf-sample.log | grep -v "cluster kernel alone"
