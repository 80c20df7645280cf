#!/usr/bin/env bash
# Session 40, device call 1: the whole GPU suite on the tree after bca18b0 (never run whole since the sampling
# kernels changed: the logit bias in the sampling tests, ServeGpu.SeededAndPenalized... with biased
# requests, the HTTP test's logit_bias requests),
# within a ~600 s call.
# Run (carry [".devrun"]): bash docs/measurements/s40-2026-12-07/s40a.sh $OUT
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz
timeout ${SUITE_S:-560} scripts/gpu-tests.sh build $out/gpu-suite.log > /dev/null 2>&1
echo "suite rc $? ($(( $(date +%s) - t0 )) s)" > $out/results.log
tail -1 $out/gpu-suite.log >> $out/results.log
grep -E "^\s*[0-9]+ - |\*\*\*Failed|Timeout|serve-gpu\]" $out/gpu-suite.log | head -20 >> $out/results.log
grep -c " Passed " $out/gpu-suite.log >> $out/results.log
gzip -9 $out/gpu-suite.log
cat $out/results.log
