#!/usr/bin/env python3
"""kern serve on the GPU against kern run (ctest label gpu): the default model's greedy text for a
few prompts from POST /v1/completions must equal kern run's, alone, as one request with a batch of
prompts, and while 60 other requests share the server's steps; with a logit_bias (one token lifted
by +100; the reference's first tokens banned at -100) the text must equal kern run's with the same
--logit-bias and differ from the unbiased one; the server drains on SIGTERM and exits 0.

  python3 serve_vs_run.py KERN KERNELS_DIR MODEL_DIR WORK_DIR
"""
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

import kern_server

kern, kernels, model, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
steps = 24
prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "In 1905, Albert Einstein"]

manifest = os.path.join(work, "manifest.json")
subprocess.run([kern, "gen", "qwen3", model, "-o", manifest, "--kernels-dir", kernels], check=True,
               stdout=subprocess.DEVNULL)


def kern_run(p, *extra):
    r = subprocess.run([kern, "run", "--manifest", manifest, "--kernels", kernels, "--weights", model, "--tokenizer",
                        os.path.join(model, "tokenizer.json"), "--prompt", p, "--steps", str(steps), *extra],
                       check=True, capture_output=True, text=True)
    return r.stdout.rstrip("\n")


reference = [kern_run(p) for p in prompts]

log = open(os.path.join(work, "serve.log"), "w")
t0 = time.time()
srv, base = kern_server.start(kern, ["--weights", model, "--kernels", kernels, "--max-seqs", "64", "--capacity", "65536"],
                              log)
print(f"[serve-vs-run] server ready in {time.time() - t0:.1f} s at {base}")
url = base + "/v1/completions"


def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def complete(prompt, max_tokens=steps, **extra):
    body = {"model": os.path.basename(model.rstrip("/")), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    return post("/v1/completions", {**body, **extra})["choices"][0]["text"]


failures = 0
alone = [complete(p) for p in prompts]
for p, a, ref in zip(prompts, alone, reference):
    if a != ref:
        failures += 1
        print(f"[serve-vs-run] alone: {p!r}: server {a!r} != kern run {ref!r}")
print(f"[serve-vs-run] alone: {sum(a == r for a, r in zip(alone, reference))} of {len(prompts)} equal kern run")

# The same prompts as one request's batch (`prompt` an array): choice i is prompt i's text.
body = json.dumps({"model": os.path.basename(model.rstrip("/")), "prompt": prompts, "max_tokens": steps,
                   "temperature": 0}).encode()
with urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=120) as r:
    choices = sorted(json.loads(r.read())["choices"], key=lambda c: c["index"])
batched = [c["text"] for c in choices]
if len(batched) != len(prompts):
    failures += 1
    print(f"[serve-vs-run] one batch request: {len(batched)} choices for {len(prompts)} prompts")
for p, b, ref in zip(prompts, batched, reference):
    if b != ref:
        failures += 1
        print(f"[serve-vs-run] one batch request: {p!r}: server {b!r} != kern run {ref!r}")
print(f"[serve-vs-run] one batch request: {sum(b == r for b, r in zip(batched, reference))} of {len(prompts)} equal kern run")

# logit_bias: the same text as kern run's --logit-bias, and not the unbiased text.
banned = post("/tokenize", {"prompt": reference[0], "add_special_tokens": False})["tokens"][:3]
for bias in ({"1000": 100.0}, {str(t): -100.0 for t in banned}):
    flag = ",".join(f"{k}:{v}" for k, v in bias.items())
    want = kern_run(prompts[0], "--logit-bias", flag)
    got = complete(prompts[0], logit_bias=bias)
    ok = got == want and got != reference[0]
    failures += 0 if ok else 1
    print(f"[serve-vs-run] logit_bias {flag}: server {got[:40]!r} kern run {want[:40]!r} "
          f"unbiased {reference[0][:40]!r}: {'ok' if ok else 'MISMATCH'}")

rng = random.Random(1)
words = ["alpha", "river", "stone", "seven", "light", "north", "quiet", "paper", "green", "table"]
others = [" ".join(rng.choice(words) for _ in range(rng.randrange(3, 200))) for _ in range(60)]
batch = prompts + others
rng.shuffle(batch)
with concurrent.futures.ThreadPoolExecutor(max_workers=64) as ex:
    got = dict(zip(batch, ex.map(lambda p: complete(p, steps if p in prompts else rng.randrange(8, 64)), batch)))
together = [got[p] for p in prompts]
for p, t, ref in zip(prompts, together, reference):
    if t != ref:
        failures += 1
        print(f"[serve-vs-run] among 63 others: {p!r}: server {t!r} != kern run {ref!r}")
print(f"[serve-vs-run] among 63 others: {sum(t == r for t, r in zip(together, reference))} of {len(prompts)} equal kern run")

srv.send_signal(signal.SIGTERM)
code = srv.wait(timeout=60)
print(f"[serve-vs-run] SIGTERM: exit {code}")
if code != 0:
    failures += 1
sys.exit(1 if failures else 0)
