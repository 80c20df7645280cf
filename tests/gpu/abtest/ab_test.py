#!/usr/bin/env python3
"""kern test on the GPU (ctest label gpu), over the default model (assets/default-model):

1. the default manifest against itself: PASS on bit-identical rows, most weights shared;
2. --decode-attn-f32 and --decode-chain variants against the default: PASS within KL 0.01;
3. a tampered candidate (RoPE base 10000 -> 500000 in every launch that takes it): FAIL;
4. the device compare against --host-compare on the --decode-attn-f32 pair: the same verdict and
   per-position figures (the compare kernels against compare_rows on real logits).

usage: ab_test.py KERN KERNELS_DIR MODEL_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_checks import Checks, fresh_dir  # noqa: E402


def run(cmd, want=(0,)):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True)
    print(r.stdout[-3000:], r.stderr[-3000:], sep="\n", flush=True)
    if r.returncode not in want:
        raise SystemExit(f"exit status {r.returncode} (wanted {want}): {' '.join(cmd)}")
    return r


def main():
    kern, kernels, model, work = sys.argv[1:5]
    fresh_dir(work)
    checks = Checks()
    expect, failures = checks.expect, checks.failures

    def gen(name, *flags):
        path = os.path.join(work, name + ".json")
        run([kern, "gen", "qwen3", model, "-o", path, "--kernels-dir", kernels, "--logits-output", *flags])
        return path

    base = gen("default")
    f32 = gen("attn-f32", "--decode-attn-f32")
    chain = gen("chain", "--decode-chain")

    # The tampered candidate: the RoPE base of every launch that takes one.
    m = json.load(open(base))
    tampered = 0
    for op in m["ops"].values():
        for launch in op["impl"]["launches"]:
            for i, a in enumerate(launch.get("args", [])):
                if isinstance(a, dict) and a.get("f32") == 10000.0:
                    launch["args"][i] = {"f32": 500000.0}
                    tampered += 1
    expect(tampered > 0, f"the tampered manifest changes {tampered} RoPE base args")
    bad = os.path.join(work, "tampered.json")
    json.dump(m, open(bad, "w"))

    def test(cand, ref, *flags, want=(0,)):
        out = os.path.join(work, os.path.basename(cand) + "-vs-" + os.path.basename(ref) + "".join(flags) + ".report")
        r = run([kern, "test", cand, "--reference", ref, "--weights", model, "--kernels", kernels, "--prompts", "6",
                 "--steps", "24", "--max-prompt", "700", "--json", out, *flags], want=want)
        return r, json.load(open(out))

    r, rep = test(base, base)
    s = rep["summary"]
    expect(r.returncode == 0 and s["verdict"] == "PASS", f"self: {s['verdict']} ({s['rung']})")
    expect(s["identical"] == s["positions"] == 6 * 24, f"self: {s['identical']} of {s['positions']} rows identical")
    expect("shared with the reference" in r.stderr and " 0 buffers" not in r.stderr, "self: weights shared")

    for cand, name in ((f32, "decode-attn-f32"), (chain, "decode-chain")):
        r, rep = test(cand, base)
        s = rep["summary"]
        expect(s["verdict"] == "PASS", f"{name}: {s['verdict']} ({s['rung']}), KL max {s['kl_max']:.3g}, "
               f"top-1 {s['top1_agreement']:.4f}, max |d| {s['max_abs_diff']:.3g}")
        expect(s["positions"] == 6 * 24, f"{name}: {s['positions']} positions")

    r, rep = test(bad, base, want=(3, 4))
    s = rep["summary"]
    expect(s["verdict"] == "FAIL" and r.returncode == 3,
           f"tampered: {s['verdict']} (exit {r.returncode}), KL max {s['kl_max']:.3g}, first divergence "
           f"{s['first_divergence']}")

    _, dev = test(f32, base)
    _, host = test(f32, base, "--host-compare")
    expect(dev["summary"]["verdict"] == host["summary"]["verdict"], "device and host compare: one verdict")
    worst = 0.0
    same_ints = True
    for a, b in zip(dev["rows"], host["rows"]):
        for k in ("top1_reference", "top1_candidate", "nonfinite", "identical", "rank_in_candidate", "top20_overlap"):
            same_ints &= a[k] == b[k]
        for k in ("kl", "max_abs_diff", "margin_reference"):
            worst = max(worst, abs(a[k] - b[k]) / max(1.0, abs(b[k])))
    expect(len(dev["rows"]) == len(host["rows"]) and same_ints, "device and host compare: the same integer fields")
    expect(worst <= 1e-9, f"device and host compare: float fields within 1e-9 (worst {worst:.3g})")

    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed: " + "; ".join(failures))
    print("kern test GPU checks passed")


if __name__ == "__main__":
    main()
