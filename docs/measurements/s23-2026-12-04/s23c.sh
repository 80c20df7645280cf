#!/usr/bin/env bash
# Session 23, device round 3: where the race kernel's greedy path lost ~2.4 us at batch 1: PerfGpu.Sample
# with four builds of kernels/sample.fatbin (lb4: this tree; lb6: __launch_bounds__(256, 6); nolist /
# nolist6: the list path compiled out, at 4 and 6 blocks per SM) and the committed tree's (old);
# Nsight Compute on the first race launch (greedy, batch 1) of old and lb4; then kern bench on the 4B
# shape with the strengthened PyTorch peer.
set -u
out=$1
tar -xJf .devrun/pack.txz
mkdir -p old && tar -C old -xJf .devrun/old.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
R=$out/results.log; : > $R
for v in lb4 lb6 nolist nolist6; do
  mkdir -p var/$v && cp build/kernels/* var/$v/ && cp .devrun/var/$v/sample.fatbin var/$v/
done
for k in lb4 old lb6 nolist nolist6 lb4 old; do
  if [ $k = old ]; then b=$root/old/build; d=$b/kernels; else b=$root/build; d=$root/var/$k; fi
  KERN_KERNELS_DIR=$d timeout 60 $b/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > $out/perf-$k.log 2>&1; echo "perf $k rc $?" >> $R
  grep -E "sample op|race kernel alone|argmax" $out/perf-$k.log | sed "s/^/$k /" >> $out/perf-all.log
done
python3 - $out/perf-all.log >> $R <<'PY'
import sys, re, collections
v = collections.defaultdict(list); ks = []
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) \[figure\] (.*?) vocab 151936 us: ([\d.]+)", line)
    if m:
        v[(m.group(2), m.group(1))].append(float(m.group(3)))
        if m.group(1) not in ks: ks.append(m.group(1))
names = []
for (n, k) in v:
    if n not in names: names.append(n)
print("| figure (us) | " + " | ".join(ks) + " |")
for n in names:
    print(f"| {n} | " + " | ".join(" / ".join(str(x) for x in v[(n, k)]) for k in ks) + " |")
PY
for k in old lb4; do
  if [ $k = old ]; then b=$root/old/build; d=$b/kernels; else b=$root/build; d=$root/var/$k; fi
  KERN_KERNELS_DIR=$d timeout 90 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats -k regex:kern_sample_race -c 1 $b/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > $out/ncu-$k.txt 2>&1; echo "ncu $k rc $?" >> $R
done
t0=$(date +%s)
timeout 100 build/bin/kern synth qwen3 --preset 4b --no-tokenizer -o /tmp/m4b > $out/synth.log 2>&1; echo "synth rc $?" >> $R
timeout 330 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --no-startup --json $out/bench.json > $out/bench.txt 2> $out/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
cat $out/bench.txt >> $R
cat $R
