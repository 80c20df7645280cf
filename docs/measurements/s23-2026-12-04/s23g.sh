#!/usr/bin/env bash
# Session 23, device round 7: the whole GPU suite and the HF gate (tiny, default) on the final tree
# (the race kernel's lists, pass-1 bins in a register, __launch_bounds__(256, 6), 12 KB of staging).
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
SUITE_TIMEOUT=410 GATE_TIMEOUT=140 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
cat $out/check.log
