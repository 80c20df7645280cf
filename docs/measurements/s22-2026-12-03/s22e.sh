#!/usr/bin/env bash
# Session 22, device round 5 (the final tree: mixed steps off by default, the prefill without logits, first_row): the whole GPU suite and the HF
# gate on tiny and the default model (scripts/dev/check.sh).
set -u
out=$1
t0=$(date +%s)
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
export KERN_KERNELS_DIR=$root/build/kernels
bash scripts/setup-tokenizer.sh > /tmp/setup-tokenizer.log 2>&1
SUITE_TIMEOUT=410 GATE_TIMEOUT=140 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
echo "check rc $? ($(( $(date +%s) - t0 )) s)" >> $out/check.log
grep -h "\[prompt-logprobs\]\|\[host-tier\]\|\[serve-gpu\]" build/Testing/Temporary/LastTest.log >> $out/check.log 2>/dev/null
rm -f $out/chk/rope-source.txt
cat $out/check.log
