#!/usr/bin/env bash
# Session 24, device round 10: the HF gate (tiny and default shapes) with every manifest rewritten to
# run the PyTorch peer's captured SiLU and multiply kernels for one-row calls (MANIFEST_HOOK), the
# modules landed by hash into the kernels dir the gate runs with.
set -u
out=$1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
bash scripts/setup-tokenizer.sh > $out/tok.log 2>&1
rm -rf /tmp/capg
timeout 120 $k capture -o /tmp/capg -- python3 bench/torch_peer.py --config assets/default-model/config.json --contexts 64 --prefill 64 --replays 20 --reps 1 > /tmp/capg.txt 2> /tmp/capg.err; echo "capture rc $?"
$k kernels --kernels build/kernels /tmp/capg/modules/* > /tmp/land.txt 2>&1; echo "landed rc $? $(grep -c '^landed' /tmp/land.txt)"
export MANIFEST_HOOK="python3 $root/scripts/capture/captured_silu_mul.py --capture /tmp/capg/capture.jsonl --manifest"
SKIP_SUITE=1 GATE_TIMEOUT=200 bash scripts/dev/check.sh build $out/chk "tiny default" > $out/check.log 2>&1
grep -E "MANIFEST_HOOK|PASS|FAIL|mean|mismatch" $out/check.log | head -20
