#!/usr/bin/env bash
# Session 28, device round 2: the rows GEMM after round 1 (rows >= m no longer copied): tests, the
# time sweep with 4 stages (2 blocks per SM), 6 and 8 stages (1 block per SM; fatbins built with
# -DKERN_GEMM_ROWS_STAGES), and Nsight Compute on three points of the 4-stage kernel.
# Run (carry [".devrun"]): bash docs/measurements/s28-2026-12-06/s28b.sh $OUT
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
best() {
python3 - $1 <<'PY'
import sys,re,collections
best=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=re.match(r".*gemm_rows (.*) m(\d+) splits(\d+) us: ([\d.]+)",line.strip())
    if not m: continue
    k=(m.group(1),int(m.group(2))); v=(float(m.group(4)),int(m.group(3)))
    if k not in best or v<best[k]: best[k]=v
for (s,mm),(us,sp) in best.items(): print(f"{s:28s} m{mm:<4d} best {us:8.2f} us at splits {sp}")
PY
}
for v in 4 6 8; do
  dir=$root/build/kernels; [ $v = 4 ] || dir=$root/.devrun/v$v
  KERN_KERNELS_DIR=$dir KERN_GEMM_ROWS_STAGES=$v timeout 200 $t --gtest_filter='PerfGpu.GemmRowsQwen3_4B' > $out/perf-s$v.log 2>&1
  echo "== stages $v rc $?"; grep "copy GB" $out/perf-s$v.log | sed 's/^.*figure\] //'; best $out/perf-s$v.log
done
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for pt in "o_proj,1,4" "gate_up,1,1" "qkv,64,2" "o_proj,1,13"; do
  KERN_GEMM_ROWS_ONLY=$pt timeout 120 $ncu --clock-control none --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:gemm_rows --launch-skip 5 -c 1 \
    $t --gtest_filter='PerfGpu.GemmRowsQwen3_4B' > $out/ncu-${pt//,/-}.txt 2>&1
  echo "== ncu $pt rc $?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared|Warp Cycles Per Issued|Registers Per|Waves Per SM|Dynamic Shared" $out/ncu-${pt//,/-}.txt | head -14
done
