#!/usr/bin/env bash
# Session 24, device round 9: a manifest over captured kernels (issue 19's second bullet): the
# PyTorch peer's SiLU and multiply kernels, captured on the default model's shape and landed by
# hash, run in place of kern_silu_mul_bf16 for one-row calls (scripts/capture/captured_silu_mul.py);
# kern run with kern gen's manifest and with it: text, and the logits compared row by row.
set -u
out=$1
log=$out/round9.log
exec > >(tee -a $log) 2>&1
tar -xJf .devrun/pack.txz
root=$(pwd -P); [ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
k=$root/build/bin/kern
dm=/tmp/dm; mkdir -p $dm
cp assets/default-model/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} $dm/
$k gen qwen3 $dm -o $dm/m1.json --kernels-dir build/kernels --logits-output 2>&1 | tail -1
echo "== capture the peer on the default model's shape"
timeout 120 $k capture -o /tmp/cap -- python3 bench/torch_peer.py --config $dm/config.json --contexts 64 --prefill 64 --replays 20 --reps 1 > /tmp/cap.txt 2> /tmp/cap.err; echo "capture rc $?"
grep "^kern capture" /tmp/cap.err; grep -i "silu\|MulFunctorIfEEEESt5arrayIPcLm3" /tmp/cap.txt | cut -c1-160
cp -r build/kernels /tmp/k2
$k kernels --kernels /tmp/k2 /tmp/cap/modules/* > /tmp/land.txt 2>&1; echo "landed rc $? $(grep -c '^landed' /tmp/land.txt)"
python3 scripts/capture/captured_silu_mul.py --manifest $dm/m1.json --capture /tmp/cap/capture.jsonl -o $dm/m2.json; echo "script rc $?"
$k verify $dm/m2.json > /tmp/verify.txt 2>&1; echo "verify rc $?"; tail -1 /tmp/verify.txt
echo "== kern run, kern gen's manifest (m1) and the captured one (m2)"
for v in m1 m2; do
  timeout 60 $k run --manifest $dm/$v.json --kernels /tmp/k2 --weights $dm --tokenizer $dm/tokenizer.json \
    --prompt "The capital of France is" --steps 40 --dump-logits /tmp/$v.npy > /tmp/$v.txt 2> /tmp/$v.err; echo "$v rc $?"
  tail -3 /tmp/$v.err | cut -c1-200; echo "text: $(cat /tmp/$v.txt)"
done
cmp -s /tmp/m1.txt /tmp/m2.txt && echo "texts: identical" || echo "texts: DIFFER"
python3 - <<'PY'
import numpy as np
a = np.load("/tmp/m1.npy").astype(np.float64); b = np.load("/tmp/m2.npy").astype(np.float64)
print("rows", a.shape, b.shape)
n = min(len(a), len(b)); a, b = a[:n], b[:n]
def logsm(x):
    x = x - x.max(1, keepdims=True); return x - np.log(np.exp(x).sum(1, keepdims=True))
la, lb = logsm(a), logsm(b)
kl = (np.exp(la) * (la - lb)).sum(1)
print("KL(m1 || m2) per row: max %.3g mean %.3g; top-1 agree %d of %d; max |dlogit| %.4g; bitwise-equal rows %d"
      % (kl.max(), kl.mean(), int((a.argmax(1) == b.argmax(1)).sum()), n, np.abs(a - b).max(),
         int(sum(np.array_equal(a[i], b[i]) for i in range(n)))))
PY
echo "== kern run with m2 under kern capture (torch's kernels inside kern's decode graph)"
timeout 60 $k capture -o /tmp/capm2 -- $k run --manifest $dm/m2.json --kernels /tmp/k2 --weights $dm --tokenizer $dm/tokenizer.json --prompt "The capital of France is" --steps 8 > /tmp/capm2.txt 2>/tmp/capm2.err; echo "rc $?"
grep -i "vectorized\|graph\|modules," /tmp/capm2.txt | cut -c1-170
