#!/usr/bin/env python3
"""kern serve --host-gib on the GPU (ctest label gpu): a small KV pool fills with other prompts'
pages until the first prompt's prefix entry is parked on the host tier; sent again, the
prompt must start from it (cached tokens, a wake in /metrics) and give the same greedy text as it
did cold, whose pages were never parked. The server drains on SIGTERM and exits 0.

  python3 host_tier.py KERN KERNELS_DIR MODEL_DIR WORK_DIR
"""
import json
import os
import re
import sys
import time
import urllib.request

import kern_server

kern, kernels, model, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
name = os.path.basename(model.rstrip("/"))
log = open(os.path.join(work, "serve-host-tier.log"), "w")
srv, base = kern_server.start(kern, ["--weights", model, "--kernels", kernels, "--max-seqs", "8", "--capacity", "2048",
                                     "--host-gib", "1"], log)


def complete(prompt_ids):
    body = json.dumps({"model": name, "prompt": prompt_ids, "max_tokens": 16, "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=120) as r:
        out = json.loads(r.read())
    return out["choices"][0]["text"], out["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0), time.time() - t


def metric(text, key):
    m = re.search(r"^" + re.escape(key) + r"\{[^}]*\} (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1


def metrics():
    return urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()


first = [100 + (i * 7919) % 3900 for i in range(900)]  # the default model's vocabulary is 4,096
cold, cold_cached, cold_s = complete(first)
# Other prompts until the pool (--capacity is what it makes at load; its chunks hold more pages) has
# had to park a prefix entry: the first prompt's is the coldest.
others = 0
while metric(metrics(), "kern:host_tier_parks_total") < 1 and others < 400:
    complete([50 + (others * 977 + i * 104729) % 3990 for i in range(900)])
    others += 1
warm, warm_cached, warm_s = complete(first)
m = metrics()
parks, wakes = metric(m, "kern:host_tier_parks_total"), metric(m, "kern:host_tier_wakes_total")
print(f"[host-tier] cold: {cold_cached} cached, {cold_s * 1e3:.0f} ms; again after {others} other prompts: "
      f"{warm_cached} cached, {warm_s * 1e3:.0f} ms; parks {parks:.0f}, wakes {wakes:.0f}; same text: {cold == warm}")
rc = kern_server.stop(srv)
failures = 0
if warm != cold:
    print(f"[host-tier] the woken prompt's text differs:\n  cold {cold!r}\n  warm {warm!r}")
    failures += 1
if warm_cached < 512 or wakes < 1 or parks < 1:
    print("[host-tier] the prompt did not start from the host tier")
    failures += 1
if rc != 0:
    print(f"[host-tier] kern serve exited {rc} after SIGTERM")
    failures += 1
sys.exit(1 if failures else 0)
