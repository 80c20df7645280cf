#!/usr/bin/env bash
# Session 39, device call 1 (as s38a.sh): on an H200, issue 17's load table (s37c.sh's first part, the same
# procedure) and kern bench on the three shapes; on an H100, the whole GPU suite on the final tree.
# Run (carry [".devrun"]): bash docs/measurements/s39-2026-12-07/s39a.sh $OUT
set -u
out=$1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
R=$out/results.log
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $gpu" >> $R
if echo "$gpu" | grep -q H200; then
  timeout 330 bash docs/measurements/s37-2026-12-07/s37c.sh $out/s37c > /dev/null 2>&1
  mkdir -p $out/s37c; cat $out/s37c/results.log >> $R 2>/dev/null
  KERN_BENCH_SHAPES=0.6b,4b,8b timeout $(( 560 - $(el) )) scripts/bench-shapes.sh /tmp/shapes --contexts 1024 --prefill 2048 --no-startup --no-pool --replays 50 > $out/shapes.txt 2>&1
  echo "shapes rc $? ($(el) s)" >> $R
  cp /tmp/shapes/*.txt $out/ 2>/dev/null
else
  tar -xJf .devrun/pack.txz
  timeout 570 scripts/gpu-tests.sh build $out/gpu-suite.log > /dev/null 2>&1
  echo "suite rc $? ($(el) s)" >> $R
  tail -1 $out/gpu-suite.log >> $R
  grep -E "^\s*[0-9]+ - |Failed|\*\*\*" $out/gpu-suite.log | head -20 >> $R
fi
echo "total $(el) s" >> $R
cat $R
