#!/usr/bin/env python3
"""A kern manifest that runs a captured op family in place of kern's: the PyTorch peer's SiLU and
multiply kernels (F.silu(g) * u, two launches of at::native::vectorized_elementwise_kernel<8, ...>)
instead of kern_silu_mul_bf16, for one-row calls (kern run's decode steps and last prompt token);
calls of more rows keep kern's kernel, since torch's kernels take contiguous operands and a
row's gate and up halves are contiguous only when there is one row.

usage: captured_silu_mul.py --capture DIR/capture.jsonl [-o OUT.json] --manifest M.json
(without -o, M.json is rewritten in place: scripts/gate/run_gate.sh's MANIFEST_HOOK)

The modules are named by the hashes kern capture recorded (land DIR/modules/* with kern kernels
into the kernels dir the manifest is run with); their parameter layouts must be the recorded ones
(n: i32 at 0, the functor: 1 byte at 4, the operand pointers from 8), which the runtime's ABI check
verifies again at load (cuFuncGetParamInfo). docs/capture.md.
"""
import argparse
import json
import sys

SILU = "ActivationSiluKernel"
MUL = "BinaryFunctorIN3c108BFloat16ES4_S4_NS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm3EE"
VEC8 = "_ZN2at6native29vectorized_elementwise_kernelILi8E"
BLOCK_WORK = 128 * 8  # torch's vectorized kernel: 128 threads, 8 elements each per block


def captured(capture, marker, params):
    """(module hash, entry) of the recorded launch whose entry holds `marker`, with `params`."""
    found = {}
    with open(capture) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    for r in lines[1:]:
        if r.get("kind") == "launch" and r["entry"].startswith(VEC8) and marker in r["entry"]:
            found[(r["module"], r["entry"])] = r["params"]
    if not found:
        sys.exit(f"captured_silu_mul: no recorded launch of {VEC8}...{marker}...")
    if len(found) > 1:
        sys.exit(f"captured_silu_mul: {len(found)} recorded entries match {marker}: {sorted(found)}")
    (module, entry), got = next(iter(found.items()))
    if got != params:
        sys.exit(f"captured_silu_mul: {entry} takes {got}, this script writes {params}")
    return module, entry


def rows_of(m, op_name, param):
    """The var every call of `op_name` passes at `param` (the launch's row count)."""
    names = set()
    for p in m["programs"].values():
        for c in p.get("calls", []):
            if c["op"] == op_name:
                arg = c["args"][param]
                if "var" not in arg:
                    sys.exit(f"captured_silu_mul: {op_name}'s rows arg {arg} is not a var")
                names.add(arg["var"])
    if len(names) != 1:
        sys.exit(f"captured_silu_mul: {op_name} is called with rows {sorted(names)}")
    return names.pop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--capture", required=True)
    ap.add_argument("-o", "--out", help="output manifest (default: rewrite --manifest)")
    a = ap.parse_args()
    a.out = a.out or a.manifest
    with open(a.manifest) as f:
        m = json.load(f)
    silu_mod, silu_entry = captured(a.capture, SILU, [[0, 4], [4, 1], [8, 16]])
    mul_mod, mul_entry = captured(a.capture, MUL, [[0, 4], [4, 1], [8, 24]])
    program = a.capture
    m["modules"]["torch_silu"] = {"source": f"kern capture ({program})", "sha256": silu_mod}
    m["modules"]["torch_mul"] = {"source": f"kern capture ({program})", "sha256": mul_mod}
    calls = 0
    # Each op that launches kern_silu_mul_bf16 (the prefill's silu_mul; the decode's fused gate_up
    # GEMM + SiLU, split here into the GEMM and a SiLU op called after it, so that the second op
    # reads a gate_up the first wrote): a SiLU op of (gate, up = the same buffer one half on, act,
    # rows) whose launch is split by rows into torch's two kernels (one row) and kern's (more).
    for name in sorted(m["ops"]):
        op = m["ops"][name]
        launches = op["impl"]["launches"]
        at = [i for i, l in enumerate(launches) if l.get("entry") == "kern_silu_mul_bf16"]
        if not at:
            continue
        (i,) = at
        kern = launches[i]
        if "when" in kern:
            sys.exit(f"captured_silu_mul: {name}'s kern_silu_mul_bf16 launch has a `when` already")
        if i != len(launches) - 1:
            sys.exit(f"captured_silu_mul: {name}'s kern_silu_mul_bf16 is not its last launch")
        gate_up_p, act_p, rows_p = (kern["args"][j]["param"] for j in range(3))
        inter = kern["args"][3]["i32"]
        if inter % 8:
            sys.exit(f"captured_silu_mul: intermediate size {inter} is not a multiple of 8 (torch's <8> kernels need 16-byte operands)")
        rows_var = rows_of(m, name, rows_p)
        grid = [-(-inter // BLOCK_WORK), 1, 1]
        one_row = {"var": rows_var, "min": 1, "max": 1}
        # the SiLU op's params: 0 gate, 1 up, 2 act, 3 rows
        silu = {"module": "torch_silu", "entry": silu_entry, "params": ["i32", "bytes<1>", "bytes<16>"],
                "block": [128, 1, 1], "grid": grid, "when": one_row,
                "args": [{"i32": inter}, {"pack": {"size": 1, "fields": []}},
                         {"pack": {"size": 16, "fields": [{"at": 0, "scratch": "silu"}, {"at": 8, "param": 0}]}}]}
        mul = {"module": "torch_mul", "entry": mul_entry, "params": ["i32", "bytes<1>", "bytes<24>"],
               "block": [128, 1, 1], "grid": grid, "when": one_row,
               "args": [{"i32": inter}, {"pack": {"size": 1, "fields": []}},
                        {"pack": {"size": 24, "fields": [{"at": 0, "param": 2}, {"at": 8, "scratch": "silu"},
                                                         {"at": 16, "param": 1}]}}]}
        kern = dict(kern)
        kern["when"] = {"var": rows_var, "min": 2}
        kern["args"] = [{"param": 0}, {"param": 2}, {"param": 3}, {"i32": inter}]
        silu_op = name + "_captured_silu"
        m["ops"][silu_op] = {
            "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", op["params"][rows_p]],
            "impl": {"scratch": {"silu": {"dtype": "bf16", "shape": [inter]}}, "launches": [silu, mul, kern]},
        }
        alone = len(launches) == 1
        if alone:
            del m["ops"][name]
        else:
            del launches[i]
            # act is no longer written by the GEMM op: drop it from its params (and its calls' args)
            used = any(l.get("args") is None or any(x.get("param") == act_p for x in l["args"]) for l in launches)
            if used:
                sys.exit(f"captured_silu_mul: {name} uses act beyond its SiLU launch")
            del op["params"][act_p]
            for l in launches:
                for x in l["args"]:
                    if "param" in x and x["param"] > act_p:
                        x["param"] -= 1
        for p in m["programs"].values():
            out = []
            for c in p.get("calls", []):
                if c["op"] != name:
                    out.append(c)
                    continue
                args = c["args"]
                up = dict(args[gate_up_p])
                up["offset"] = up.get("offset", 0) + 2 * inter
                if not alone:
                    out.append({**c, "args": [x for j, x in enumerate(args) if j != act_p]})
                label = c.get("label", name)
                out.append({"label": label + ".captured_silu", "op": silu_op,
                            "args": [args[gate_up_p], up, args[act_p], args[rows_p]]})
                calls += 1
            if "calls" in p:
                p["calls"] = out
    with open(a.out, "w") as f:
        json.dump(m, f, indent=1)
    print(f"captured_silu_mul: {calls} calls -> torch {silu_entry[:60]}... ({silu_mod[:12]}) and "
          f"{mul_entry[:60]}... ({mul_mod[:12]}) for one row, kern_silu_mul_bf16 for more -> {a.out}")


if __name__ == "__main__":
    main()
