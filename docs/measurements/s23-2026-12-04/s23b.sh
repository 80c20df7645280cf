#!/usr/bin/env bash
# Session 23, device round 2: the race kernel with the finalize's lists staged in shared memory and
# one fence per chunk; PerfGpu.Sample of this tree and of the committed tree before it (c16610cd:
# the race kernel without lists), alternating, in one run; the sampling checks again; then kern
# bench on the 4B shape with the strengthened PyTorch peer.
set -u
out=$1
tar -xJf .devrun/pack.txz
mkdir -p old && tar -C old -xJf .devrun/old.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
R=$out/results.log
T=build/tests/gpu/kernels/kern_kernels_gpu_test
KERN_KERNELS_DIR=$root/build/kernels timeout 150 $T --gtest_filter='SampleGpu*:KernelCatalogueGpu*' > $out/sample.log 2>&1; echo "sample rc $?" > $R
grep -E "FAILED|Failure|PASSED|Expected|Which is" $out/sample.log | head -40 >> $R
for k in new old new old; do
  if [ $k = new ]; then d=$root/build; else d=$root/old/build; fi
  KERN_KERNELS_DIR=$d/kernels timeout 100 $d/tests/gpu/kernels/kern_kernels_gpu_test --gtest_filter='PerfGpu.Sample' > $out/perf-$k.log 2>&1; echo "perf $k rc $?" >> $R
  grep -E "sample op|race kernel alone|argmax" $out/perf-$k.log | sed "s/^/$k /" >> $out/perf-all.log
done
python3 - $out/perf-all.log >> $R <<'PY'
import sys, re, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) \[figure\] (.*?): ([\d.]+)", line)
    if m: v[(m.group(2), m.group(1))].append(float(m.group(3)))
names = []
for (n, k) in v:
    if n not in names: names.append(n)
print("| figure (us) | new | old |")
for n in names:
    print(f"| {n} | {' / '.join(str(x) for x in v[(n,'new')])} | {' / '.join(str(x) for x in v[(n,'old')])} |")
PY
t0=$(date +%s)
timeout 100 build/bin/kern synth qwen3 --preset 4b -o /tmp/m4b > $out/synth.log 2>&1; echo "synth rc $?" >> $R
timeout 330 build/bin/kern bench --weights /tmp/m4b --kernels build/kernels --json $out/bench.json > $out/bench.txt 2> $out/bench.err; echo "bench rc $? ($(( $(date +%s) - t0 )) s)" >> $R
cat $out/bench.txt >> $R
cat $R
