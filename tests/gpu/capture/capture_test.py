#!/usr/bin/env python3
"""kern capture on the GPU (ctest label gpu): kern's own decode (eager launches and graph kernel
nodes) and a PyTorch program (bench/torch_peer.py on a tiny shape, its decode step a CUDA graph),
each run under the injection library; the records are read back by kern capture itself (strict
parse, every module's bytes against its hash) and checked here for what they must hold; the
peer's modules are landed with kern kernels.

usage: capture_test.py KERN KERNELS_DIR MODEL_DIR WORK_DIR SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_checks import Checks, fresh_dir  # noqa: E402


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if r.returncode != 0:
        print(r.stdout[-4000:], r.stderr[-4000:], sep="\n", flush=True)
        raise SystemExit(f"exit status {r.returncode}: {' '.join(cmd)}")
    return r


def records(path):
    with open(path) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return lines[0], [r for r in lines[1:] if r["kind"] == "module"], [r for r in lines[1:] if r["kind"] == "launch"]


def main():
    kern, kernels, model, work, source = sys.argv[1:6]
    fresh_dir(work)
    checks = Checks()
    expect, failures = checks.expect, checks.failures

    # 1. kern run: kern's fatbins through cuModuleLoadData, eager prefill, graph decode.
    mdir = os.path.join(work, "model")
    os.makedirs(mdir)
    for f in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(model, f), mdir)
    manifest = os.path.join(mdir, "manifest.json")
    run([kern, "gen", "qwen3", mdir, "-o", manifest, "--kernels-dir", kernels])
    cap = os.path.join(work, "kern-run")
    r = run([kern, "capture", "-o", cap, "--", kern, "run", "--manifest", manifest, "--weights", mdir, "--kernels",
             kernels, "--prompt-ids", "1,2,3,4,5,6,7,8", "--steps", "12"])
    print(r.stdout)
    head, mods, launches = records(os.path.join(cap, "capture.jsonl"))
    expect(head["program"].startswith(kern), "the header names the program")
    expect("H200" in head.get("device", "") or head.get("device", "") != "", "the header names the device")
    expect(len(mods) >= 3, f"kern run's modules recorded ({len(mods)})")
    entries = {l["entry"] for l in launches}
    expect(any(e.startswith("kern_") for e in entries), f"kern's entries recorded ({len(entries)} distinct)")
    eager = [l for l in launches if "graph" not in l]
    nodes = [l for l in launches if "graph" in l]
    expect(len(eager) > 0, f"eager launches ({len(eager)})")
    expect(len(nodes) > 0, f"graph kernel nodes ({len(nodes)})")
    expect(all(l.get("ns", 0) > 0 for l in eager), "every eager launch timed")
    expect(any(l.get("runs", 1) > 1 for l in nodes), "graph nodes timed over several replays")
    expect(all(len(l["params"]) > 0 for l in launches if l["entry"].startswith("kern_")),
           "kern's kernels have their parameter layout")
    expect("graph" in r.stdout and "kernel nodes" in r.stdout, "the summary lists the graphs")

    # 2. The PyTorch peer on the same tiny shape: torch's own modules, graph-captured decode.
    cap = os.path.join(work, "peer")
    peer = [sys.executable, os.path.join(source, "bench", "torch_peer.py"), "--config",
            os.path.join(mdir, "config.json"), "--contexts", "64", "--prefill", "64", "--replays", "20",
            "--reps", "1"]
    r = run([kern, "capture", "-o", cap, "--"] + peer)
    print(r.stdout)
    head, mods, launches = records(os.path.join(cap, "capture.jsonl"))
    nodes = [l for l in launches if "graph" in l]
    expect(len(mods) >= 1, f"torch's modules recorded ({len(mods)})")
    expect(len(nodes) > 0, f"the peer's decode graph recorded ({len(nodes)} kernel nodes)")
    expect(max((l.get("runs", 0) for l in nodes), default=0) >= 20, "the decode graph's replays timed")
    landed = os.path.join(work, "landed")
    files = sorted(os.path.join(cap, "modules", f) for f in os.listdir(os.path.join(cap, "modules")))
    r = run([kern, "kernels", "--kernels", landed] + files)
    expect(r.stdout.count("landed ") == len(files), f"kern kernels landed the peer's {len(files)} modules")
    r = run([kern, "kernels", "--kernels", landed])
    expect(len(r.stdout.splitlines()) == len(files), "the landed registry lists them")

    # 3. A directory holding a capture is not overwritten.
    r = subprocess.run([kern, "capture", "-o", cap, "--", "true"], text=True, capture_output=True)
    expect(r.returncode != 0 and "holds a capture already" in r.stderr, "an existing capture is refused")

    print(f"capture test: {'FAIL' if failures else 'PASS'} ({len(failures)} failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
