#!/usr/bin/env bash
# Session 23, device round 5: where the race kernel's list rows spend their time. Nsight Compute
# (full set, SASS-level source counters) on one race launch of top-k 50 + top-p 0.9 at batch 1 and
# at batch 64 in PerfGpu.Sample; then PerfGpu.Sample for two register budgets (c: (256, 6), d:
# (256, 5), both with 12 KB of staging) beside this tree's (new) and the tree before the lists (old).
set -u
out=$1
tar -xJf .devrun/pack.txz
mkdir -p old && tar -C old -xJf .devrun/old.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
R=$out/results.log; : > $R
T=build/tests/gpu/kernels/kern_kernels_gpu_test
export KERN_KERNELS_DIR=$root/build/kernels
# race launches before top-k 50 + top-p 0.9 (op path) at batch 1: greedy and temperature, two paths each,
# 22 graph launches (warm-up + 21 replays) of 10 calls per path; at batch 64: all 9 batch-1 settings first
for spec in "b1 880" "b64 4840"; do
  set -- $spec
  timeout 150 ncu --clock-control none --set full --import-source no -k regex:kern_sample_race --launch-skip $2 -c 1 -o $out/ncu-$1 $T --gtest_filter='PerfGpu.Sample' > $out/ncu-$1.log 2>&1; echo "ncu $1 rc $?" >> $R
  ncu -i $out/ncu-$1.ncu-rep --page details > $out/ncu-$1.txt 2>&1
  ncu -i $out/ncu-$1.ncu-rep --page source --csv --print-source sass > $out/sass-$1.csv 2>&1
  grep -E "Grid Size|Duration|Registers|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per" $out/ncu-$1.txt >> $R
  rm -f $out/ncu-$1.ncu-rep
done
unset KERN_KERNELS_DIR
for v in c d; do mkdir -p var/$v && cp build/kernels/* var/$v/ && cp .devrun/var/$v/sample.fatbin var/$v/; done
for k in new old c d; do
  if [ $k = old ]; then b=$root/old/build; d=$b/kernels; elif [ $k = new ]; then b=$root/build; d=$b/kernels; else b=$root/build; d=$root/var/$k; fi
  KERN_KERNELS_DIR=$d timeout 40 $b/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > $out/perf-$k.log 2>&1; echo "perf $k rc $?" >> $R
  grep -E "sample op|argmax" $out/perf-$k.log | sed "s/^/$k /" >> $out/perf-all.log
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
cat $R
