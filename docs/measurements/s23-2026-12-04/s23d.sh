#!/usr/bin/env bash
# Session 23, device round 4: the race kernel with the common path as before the lists (a 4-field
# fold, the 32-byte partial read as two 16-byte loads, thread 0's fence), the list rows' extra fold
# apart. PerfGpu.Sample for a (this tree: 40 KB of shared staging) and b (12 KB: kStage 24) beside
# the committed tree's (old); the sampling checks with a.
set -u
out=$1
tar -xJf .devrun/pack.txz
mkdir -p old && tar -C old -xJf .devrun/old.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
R=$out/results.log; : > $R
for v in a b; do mkdir -p var/$v && cp build/kernels/* var/$v/ && cp .devrun/var/$v/sample.fatbin var/$v/; done
KERN_KERNELS_DIR=$root/var/a timeout 150 build/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='SampleGpu*:KernelCatalogueGpu*' > $out/sample.log 2>&1; echo "sample rc $?" >> $R
grep -E "FAILED|Failure|PASSED|Expected|Which is" $out/sample.log | head -40 >> $R
for k in a old b a old; do
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
cat $R
