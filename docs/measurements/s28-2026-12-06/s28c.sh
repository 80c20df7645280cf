#!/usr/bin/env bash
# Session 28, device round 3: the rows GEMM with the split tail in one L2 round trip (the last
# block of a tile loads up to 8 splits' parts at once): tests, the time sweep, and cuBLASLt's
# candidates on the same GPU in the same call (PerfGpuGemm.DecodeCandidatesAcrossBatchSizes).
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28c.sh $OUT
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
grep -B2 -A12 "Failure" $out/gemm-rows-tests.log | head -40
timeout 200 $t --gtest_filter='PerfGpu.GemmRowsQwen3_4B' > $out/perf.log 2>&1; echo "perf rc $?"
grep "copy GB" $out/perf.log | sed 's/^.*figure\] //'
python3 - $out/perf.log <<'PY'
import sys,re,collections
best=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=re.match(r".*gemm_rows (.*) m(\d+) splits(\d+) us: ([\d.]+)",line.strip())
    if not m: continue
    k=(m.group(1),int(m.group(2))); v=(float(m.group(4)),int(m.group(3)))
    if k not in best or v<best[k]: best[k]=v
for (s,mm),(us,sp) in best.items(): print(f"{s:28s} m{mm:<4d} best {us:8.2f} us at splits {sp}")
PY
timeout 240 build/tests/gpu/runtime/test_runtime_gpu --gtest_filter='PerfGpuGemm.DecodeCandidatesAcrossBatchSizes' > $out/cublaslt.log 2>&1; echo "cublaslt rc $?"
python3 - $out/cublaslt.log <<'PY'
import sys,re
best={}
for line in open(sys.argv[1]):
    m=re.match(r"\[cand\] (\S+) m_ref (\d+) #(\d+):\s+(.*?)\s+id=",line)
    if not m: continue
    vals=m.group(4).split()
    for i,mm in enumerate([1,64,128,256]):
        if vals[i]=="n/a": continue
        v=float(vals[i]); k=(m.group(1),mm)
        if k not in best or v<best[k][0]: best[k]=(v,m.group(2)+"#"+m.group(3))
for (s,mm),(v,c) in sorted(best.items()): print(f"cublaslt {s:8s} m{mm:<4d} best {v:8.2f} us ({c})")
PY
