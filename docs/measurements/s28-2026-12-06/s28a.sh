#!/usr/bin/env bash
# Session 28, device round 1: the rows GEMM (kernels/gemm_rows.cuh) on its own: correctness against
# float64 (GemmRowsGpu.*), the catalogue's ABI check, and its time at the 4B decode shapes over
# m = 1 … 256 and a range of splits (PerfGpu.GemmRowsQwen3_4B).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28a.sh $OUT
set -u
out=$1
tar -xJf .devrun/r1.txz
root=$(pwd -P)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > $out/machine.txt
cat $out/machine.txt
export KERN_KERNELS_DIR=$root/build/kernels
t=build/tests/gpu/kernels/kern_kernels_gpu_test
timeout 200 $t --gtest_filter='GemmRowsGpu*' > $out/gemm-rows-tests.log 2>&1; echo "gemm_rows tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $out/gemm-rows-tests.log | head -20
grep -B2 -A12 "Failure" $out/gemm-rows-tests.log | head -60
timeout 60 build/tests/gpu/kernels/kern_catalogue_gpu_test > $out/catalogue.log 2>&1; echo "catalogue rc $?"; tail -1 $out/catalogue.log
timeout 300 $t --gtest_filter='PerfGpu.GemmRowsQwen3_4B' > $out/perf.log 2>&1; echo "perf rc $?"
grep "figure\]" $out/perf.log | sed 's/^.*figure\] //' | grep -E "copy GB|us:" > $out/perf-us.txt
head -3 $out/perf-us.txt
# the best splits per shape and m
python3 - $out/perf-us.txt <<'PY'
import sys,re,collections
best=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=re.match(r"gemm_rows (.*) m(\d+) splits(\d+) us: ([\d.]+)",line.strip())
    if not m: continue
    k=(m.group(1),int(m.group(2)))
    v=(float(m.group(4)),int(m.group(3)))
    if k not in best or v<best[k]: best[k]=v
for (s,mm),(us,sp) in best.items(): print(f"{s:28s} m{mm:<4d} best {us:8.2f} us at splits {sp}")
PY
