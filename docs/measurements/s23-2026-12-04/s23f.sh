#!/usr/bin/env bash
# Session 23, device round 6: the race kernel's pass-1 bins kept in a register (a nibble per token,
# the exponent field as the octave) at three register budgets: v4 / v5 / v6 = __launch_bounds__(256,
# 4 / 5 / 6), all with 12 KB of staging; the sampling checks on each, then PerfGpu.Sample for them
# beside the committed tree's kernel (base) and the tree before the lists (old).
set -u
out=$1
tar -xJf .devrun/pack.txz
mkdir -p old && tar -C old -xJf .devrun/old.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
R=$out/results.log; : > $R
T=build/tests/gpu/kernels/kern_kernels_gpu_test
for v in base v4 v5 v6; do mkdir -p var/$v && cp build/kernels/* var/$v/ && cp .devrun/var/$v/sample.fatbin var/$v/; done
for v in v4 v6; do
  KERN_KERNELS_DIR=$root/var/$v timeout 100 $T --gtest_filter='SampleGpu*:KernelCatalogueGpu*' > $out/sample-$v.log 2>&1; echo "sample $v rc $?" >> $R
  grep -E "FAILED|Failure|PASSED|Expected|Which is" $out/sample-$v.log | head -20 >> $R
done
for k in base v4 old v6 v4; do
  if [ $k = old ]; then b=$root/old/build; d=$b/kernels; else b=$root/build; d=$root/var/$k; fi
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
