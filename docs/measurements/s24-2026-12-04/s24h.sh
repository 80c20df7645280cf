#!/usr/bin/env bash
# Session 24, device round 8: the final tree's GPU suite (scripts/gpu-tests.sh through
# scripts/dev/check.sh: every ctest labelled gpu, the capture test and the new extern / host-state
# tests among them) and the HF gate on the tiny and default shapes.
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
SUITE_TIMEOUT=420 GATE_TIMEOUT=140 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
tail -25 $out/check.log
grep -E "gpu suite:|Failed|\*\*\*" $out/chk/gpu-tests.log | head -20
