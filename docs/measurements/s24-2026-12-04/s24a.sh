#!/usr/bin/env bash
# Session 24, device round 1: kern capture on the H200 (its GPU test: kern run and a tiny PyTorch
# peer; then the 4B peer's decode captured, with its step time with and without capture, and its
# modules landed by kern kernels), and the sampling op's threshold ranking (SampleGpu*, the
# catalogue's ABI check, PerfGpu.Sample).
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $out/gpu.txt
{ ldconfig -p | grep -i cupti; find / -xdev -name 'libcupti.so*' 2>/dev/null | head; } > $out/cupti-found.txt
export KERN_CUPTI=$root/.devrun/libcupti.so.13
k=build/bin/kern
# 1. the capture GPU test
(cd build && timeout 150 ctest -R CaptureGpu --output-on-failure) > $out/capture-test.log 2>&1; echo "capture test rc $?"
grep -E "^(ok|FAIL)|capture test:|modules, " $out/capture-test.log | head -40
# 2. the 4B peer's decode at 1k: plain, then captured (GPU step time from the peer's own report)
$k synth qwen3 --preset 4b --no-tokenizer -o /tmp/m4b > $out/synth.log 2>&1
peer="python3 bench/torch_peer.py --config /tmp/m4b/config.json --contexts 1024 --prefill 512 --replays 300 --reps 3"
for i in 1 2; do
  timeout 100 $peer --json $out/peer-plain-$i.json > $out/peer-plain-$i.log 2>&1
  rm -rf /tmp/cap4b
  timeout 100 $k capture -o /tmp/cap4b -- $peer --json $out/peer-cap-$i.json > $out/peer-cap-$i.txt 2> $out/peer-cap-$i.err
  echo "capture $i rc $?"
done
cp /tmp/cap4b/capture.jsonl $out/peer4b-capture.jsonl
python3 - $out <<'PY'
import json, sys
out = sys.argv[1]
for i in (1, 2):
    for kind in ("plain", "cap"):
        try:
            d = json.load(open(f"{out}/peer-{kind}-{i}.json"))
            print(kind, i, [(x["context"], x["gpu_step_us"]) for x in d["decode"]],
                  [(x["tokens"], round(x["tokens_per_s"])) for x in d["prefill"]])
        except Exception as e:
            print(kind, i, "no report:", e)
PY
head -30 $out/peer-cap-2.txt; tail -3 $out/peer-cap-2.err
ls /tmp/cap4b/modules | wc -l
$k kernels --kernels /tmp/landed4b /tmp/cap4b/modules/* > $out/landed.txt 2>&1; echo "kern kernels rc $? landed $(grep -c '^landed' $out/landed.txt)"
# 3. the sampling op
timeout 200 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='*SampleGpu*:*SampleChiSquare*' > $out/sample-tests.log 2>&1; echo "sample tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $out/sample-tests.log | head -20
timeout 60 build/tests/gpu/kernels/kern_catalogue_gpu_test > $out/catalogue.log 2>&1; echo "catalogue rc $?"; tail -2 $out/catalogue.log
timeout 120 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > $out/perf-sample.log 2>&1; echo "perf rc $?"
grep "figure" $out/perf-sample.log | grep -v "cluster kernel alone" | head -40
