#!/usr/bin/env python3
"""kern serve's prompt log-probs (completions with echo and logprobs) on the GPU (ctest label gpu),
against transformers on the same checkpoint: every scored prompt position's log-prob of the
prompt's next token within the HF gate's tolerances (|delta| mean <= 0.06, p99 <= 0.2 nat), the
top-1 id equal wherever HF's top-1 / top-2 margin exceeds 0.2 nat, the first entry null; the text
generated after the echo equal to the same request's without echo (scoring writes no K/V). Run with
--max-seqs 8, so a 300-token prompt is scored in 38 forced decode calls.

  python3 prompt_logprobs.py KERN KERNELS_DIR MODEL_DIR WORK_DIR
"""
import json
import math
import os
import sys
import urllib.request

import kern_server

kern, kernels, model, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
name = os.path.basename(model.rstrip("/"))
log = open(os.path.join(work, "serve-prompt-logprobs.log"), "w")
srv, base = kern_server.start(kern, ["--weights", model, "--kernels", kernels, "--max-seqs", "8"], log)


def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


corpus = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "gate", "corpus.txt")).read()
served = []
try:
    ids = post("/tokenize", {"model": name, "prompt": corpus})["tokens"]
    prompts = [ids[:37], ids[40:340], ids[100:101 + 150]]
    for p in prompts:
        echo = post("/v1/completions", {"model": name, "prompt": p, "max_tokens": 8, "temperature": 0, "echo": True,
                                        "logprobs": 5})
        plain = post("/v1/completions", {"model": name, "prompt": p, "max_tokens": 8, "temperature": 0})
        served.append((p, echo, plain))
except Exception as e:  # the server's answer, then its log's tail
    print(f"[prompt-logprobs] request failed: {e}: {getattr(e, 'read', lambda: b'')()[:400]!r}")
    kern_server.stop(srv)
    log.close()
    print(open(log.name).read()[-3000:])
    sys.exit(1)
rc = kern_server.stop(srv)

import torch  # noqa: E402  (after the server is done with the GPU's first minutes)
from transformers import AutoModelForCausalLM  # noqa: E402

hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16).to("cuda").eval()
failures = 0
deltas = []
margin_checked = margin_missed = 0
for p, echo, plain in served:
    c = echo["choices"][0]
    lp = c["logprobs"]
    n = len(p)
    if lp["token_logprobs"][0] is not None or lp["top_logprobs"][0] is not None:
        print(f"[prompt-logprobs] the first prompt entry is not null: {lp['token_logprobs'][0]}")
        failures += 1
    if len(lp["tokens"]) != n + 8:
        print(f"[prompt-logprobs] {len(lp['tokens'])} entries for {n} prompt + 8 generated tokens")
        failures += 1
        continue
    if not c["text"].endswith(plain["choices"][0]["text"]):
        print(f"[prompt-logprobs] generated text after the echo differs from the plain request's:\n"
              f"  echo  {c['text']!r}\n  plain {plain['choices'][0]['text']!r}")
        failures += 1
    with torch.no_grad():
        logits = hf(torch.tensor([p], device="cuda")).logits[0].float()
    ref = torch.log_softmax(logits, dim=-1)
    for i in range(1, n):
        want = ref[i - 1, p[i]].item()
        got = lp["token_logprobs"][i]
        deltas.append(abs(got - want))
        top2 = torch.topk(ref[i - 1], 2)
        margin = (top2.values[0] - top2.values[1]).item()
        if margin > 0.2:
            margin_checked += 1
            best = max(lp["top_logprobs"][i].items(), key=lambda kv: kv[1])[1] if lp["top_logprobs"][i] else None
            if best is None or abs(best - top2.values[0].item()) > 0.2:
                margin_missed += 1
deltas.sort()
mean = sum(deltas) / len(deltas)
p99 = deltas[min(len(deltas) - 1, int(math.ceil(0.99 * len(deltas))) - 1)]
print(f"[prompt-logprobs] {len(deltas)} scored positions over {len(prompts)} prompts: |dlogp| mean {mean:.4f} "
      f"(<= 0.06), p99 {p99:.4f} (<= 0.2), max {deltas[-1]:.4f}; top-1 log-prob off by > 0.2 at {margin_missed} of "
      f"{margin_checked} positions with an HF margin > 0.2")
if mean > 0.06 or p99 > 0.2:
    failures += 1
if margin_missed:
    failures += 1
if rc != 0:
    print(f"[prompt-logprobs] kern serve exited {rc} after SIGTERM")
    failures += 1
sys.exit(1 if failures else 0)
