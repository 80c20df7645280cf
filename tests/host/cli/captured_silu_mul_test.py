#!/usr/bin/env python3
"""scripts/capture/captured_silu_mul.py without a GPU: on kern gen's manifest for the default model
and a made-up capture record, the rewritten manifest passes kern verify, splits each SiLU launch by
rows (torch's two kernels for one row, kern's for more) with the recorded hashes and layouts, and
the script refuses a record whose layout differs or that lacks an entry.

usage: captured_silu_mul_test.py KERN SOURCE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

SILU = ("_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_62_GLOBAL__N__7d4ed096_23_ActivationSiluKernel_cu_"
        "751192d7_1559511silu_kernelERNS_18TensorIteratorBaseEENKUlvE_clEvENKUlvE4_clEvEUlN3c108BFloat16EE_St5arrayIPcLm2EEEEviT0_T1_")
MUL = ("_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_13BinaryFunctorIN3c108BFloat16ES4_S4_NS0_15binary_internal10"
       "MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_")


def record(path, silu_params, with_mul=True):
    a, b = "a" * 64, "b" * 64
    lines = [{"kern_capture": 1, "program": "test"},
             {"kind": "module", "sha256": a, "bytes": 10, "format": "cubin"},
             {"kind": "module", "sha256": b, "bytes": 10, "format": "cubin"},
             {"kind": "launch", "module": a, "entry": SILU, "grid": [1, 1, 1], "block": [128, 1, 1], "shared": 0,
              "params": silu_params}]
    if with_mul:
        lines.append({"kind": "launch", "module": b, "entry": MUL, "grid": [1, 1, 1], "block": [128, 1, 1],
                      "shared": 0, "params": [[0, 4], [4, 1], [8, 24]]})
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")


def gen_manifest(kern, model, out):
    """kern gen qwen3 for `model`. kern gen pins every kernel family's fatbin by its hash; a tree that
    builds no kernels (the sanitized one) gets stand-in files (kern verify never opens them), one per
    family kern gen names as missing."""
    kernels = os.path.join(model, "kernels")
    os.makedirs(kernels, exist_ok=True)
    for _ in range(64):
        r = subprocess.run([kern, "gen", "qwen3", model, "-o", out, "--kernels-dir", kernels], capture_output=True, text=True)
        if r.returncode == 0:
            return
        m = re.search(r"kernel module (\S+\.fatbin) not found", r.stderr)
        if not m:
            sys.exit(f"kern gen failed: {r.stderr[-600:]}")
        with open(m.group(1), "w") as f:
            f.write("stand-in for " + os.path.basename(m.group(1)))
    sys.exit("kern gen kept naming missing kernel modules")


def main():
    kern, source, work = sys.argv[1:4]
    script = os.path.join(source, "scripts", "capture", "captured_silu_mul.py")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for f in ("config.json", "generation_config.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(source, "assets", "default-model", f), work)
    m1 = os.path.join(work, "m1.json")
    gen_manifest(kern, work, m1)
    failures = []

    def expect(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            failures.append(what)

    cap = os.path.join(work, "capture.jsonl")
    record(cap, [[0, 4], [4, 1], [8, 16]])
    m2 = os.path.join(work, "m2.json")
    r = subprocess.run([sys.executable, script, "--capture", cap, "--manifest", m1, "-o", m2], capture_output=True, text=True)
    expect(r.returncode == 0, "the script rewrites kern gen's manifest: " + r.stdout.strip()[:120] + r.stderr[-300:])
    v = subprocess.run([kern, "verify", m2], capture_output=True, text=True)
    expect(v.returncode == 0 and v.stdout.strip().endswith("ok"), "kern verify passes it" + v.stderr[-500:])
    m = json.load(open(m2))
    expect(m["modules"]["torch_silu"]["sha256"] == "a" * 64 and m["modules"]["torch_mul"]["sha256"] == "b" * 64,
           "the modules are the recorded hashes")
    silu_ops = [n for n in m["ops"] if n.endswith("_captured_silu")]
    expect(len(silu_ops) == 2, f"two SiLU ops (prefill, decode): {silu_ops}")
    ok = True
    for n in silu_ops:
        l = m["ops"][n]["impl"]["launches"]
        ok = ok and [x.get("entry") for x in l] == [SILU, MUL, "kern_silu_mul_bf16"]
        ok = ok and l[0]["when"]["min"] == 1 and l[0]["when"]["max"] == 1 and l[2]["when"]["min"] == 2
        ok = ok and l[0]["params"] == ["i32", "bytes<1>", "bytes<16>"] and l[1]["params"] == ["i32", "bytes<1>", "bytes<24>"]
    expect(ok, "each splits by rows: torch's two kernels for one row, kern's for two or more")
    calls = [c for p in m["programs"].values() for c in p.get("calls", []) if c["op"] in silu_ops]
    inter = json.load(open(os.path.join(work, "config.json")))["intermediate_size"]
    expect(len(calls) == 2 * json.load(open(os.path.join(work, "config.json")))["num_hidden_layers"] and
           all(c["args"][1].get("offset") == 2 * inter and c["args"][1]["buf"] == c["args"][0]["buf"] for c in calls),
           "every layer's calls pass up = gate_up one half on")
    expect(not any(l.get("entry") == "kern_silu_mul_bf16" for n, o in m["ops"].items() if n not in silu_ops
                   for l in o["impl"]["launches"]), "no other op launches kern_silu_mul_bf16")
    record(cap, [[0, 4], [8, 16]])
    r = subprocess.run([sys.executable, script, "--capture", cap, "--manifest", m1, "-o", m2], capture_output=True, text=True)
    expect(r.returncode != 0 and "this script writes" in r.stderr, "a record with another layout is refused")
    record(cap, [[0, 4], [4, 1], [8, 16]], with_mul=False)
    r = subprocess.run([sys.executable, script, "--capture", cap, "--manifest", m1, "-o", m2], capture_output=True, text=True)
    expect(r.returncode != 0 and "no recorded launch" in r.stderr, "a record without the multiply kernel is refused")
    print(f"captured_silu_mul test: {'FAIL' if failures else 'PASS'} ({len(failures)} failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
