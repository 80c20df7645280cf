#!/usr/bin/env python3
"""Load client for kern serve (or any OpenAI-compatible server): what `vllm bench serve` reports.

Random token-id prompts of --input-len tokens to /v1/completions with max_tokens --output-len and
ignore_eos, streamed; per concurrency level (or a Poisson rate) it prints requests/s, output and
total tokens/s, TTFT / TPOT / ITL mean, p50 and p99 (ms) and failed requests, as text and as one
JSON line per run. Needs aiohttp (the GPU machine has it).

With --model-dir, --copy-gbps and --prefill-tok-s (ceilings measured in the same session: the copy
bandwidth and the prefill rate, e.g. from `kern bench --json`: ceilings.copy_gbps, prefill[].tokens_per_s), each concurrency
level also gets its roofline bound: the prompts' prefill at the prefill rate plus each decode step
at (weight bytes + the batch's KV bytes) / copy bandwidth, as output tokens/s, and the measured
figure's fraction of it.

  python3 bench/serve_load.py --url http://127.0.0.1:8000 --model NAME --concurrency 1 8 32 64
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time

import aiohttp
import os


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one(session, url, model, prompt, out_len, result):
    body = {"model": model, "prompt": prompt, "max_tokens": out_len, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    times = []
    usage = None
    try:
        async with session.post(url + "/v1/completions", json=body) as r:
            if r.status != 200:
                result.append({"ok": False, "why": f"status {r.status}: {(await r.text())[:200]}"})
                return
            buf = b""
            async for chunk in r.content.iter_any():
                buf += chunk
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    if not ev.startswith(b"data: "):
                        continue
                    data = ev[6:]
                    if data == b"[DONE]":
                        continue
                    j = json.loads(data)
                    if "error" in j:
                        result.append({"ok": False, "why": j["error"].get("message", "")})
                        return
                    if j.get("usage"):
                        usage = j["usage"]
                    if j.get("choices") and j["choices"][0].get("text"):
                        times.append(time.perf_counter())
    except Exception as e:  # a failed request is counted, not fatal
        result.append({"ok": False, "why": repr(e)})
        return
    end = time.perf_counter()
    n = usage["completion_tokens"] if usage else len(times)
    result.append({"ok": True, "ttft": (times[0] - t0) if times else end - t0, "e2e": end - t0, "times": times,
                   "out": n, "in": usage["prompt_tokens"] if usage else len(prompt),
                   "cached": (usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0)})


async def run(args, concurrency, rate, rng):
    prompts = [[rng.randrange(1000, args.vocab) for _ in range(args.input_len)] for _ in range(args.num_prompts)]
    result = []
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
        sem = asyncio.Semaphore(concurrency if concurrency else len(prompts))

        async def go(p):
            async with sem:
                await one(session, args.url, args.model, p, args.output_len, result)

        t0 = time.perf_counter()
        tasks = []
        for p in prompts:
            tasks.append(asyncio.create_task(go(p)))
            if rate:
                await asyncio.sleep(rng.expovariate(rate))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
    ok = [r for r in result if r["ok"]]
    ttft = [r["ttft"] * 1e3 for r in ok]
    tpot = [(r["e2e"] - r["ttft"]) / (r["out"] - 1) * 1e3 for r in ok if r["out"] > 1]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r["times"], r["times"][1:])]
    out_tok = sum(r["out"] for r in ok)
    in_tok = sum(r["in"] for r in ok)
    rep = {"concurrency": concurrency, "rate": rate, "requests": len(prompts), "failed": len(result) - len(ok),
           "wall_s": wall, "req_per_s": len(ok) / wall, "output_tok_per_s": out_tok / wall,
           "total_tok_per_s": (out_tok + in_tok) / wall, "input_len": args.input_len, "output_len": args.output_len}
    for name, xs in (("ttft_ms", ttft), ("tpot_ms", tpot), ("itl_ms", itl)):
        rep[name] = {"mean": statistics.fmean(xs) if xs else float("nan"), "p50": pct(xs, 50), "p99": pct(xs, 99)}
    if len(result) != len(ok):
        rep["first_failure"] = next(r["why"] for r in result if not r["ok"])
    return rep


async def engine_counters(url):
    """The engine's own counters from /metrics (kern:engine_*), or {} when the server has none."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            async with session.get(url + "/metrics") as r:
                text = await r.text()
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        if not line.startswith("kern:engine_"):
            continue
        name, _, value = line.rpartition(" ")
        key = name.split("{")[0]
        if 'phase="' in name:
            key += "." + name.split('phase="')[1].split('"')[0]
        out[key] = float(value)
    return out


def engine_split(before, after, wall):
    """Where the engine thread's time went during one level: seconds per phase, mean decode rows."""
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    if "kern:engine_step_seconds_total.decode" not in d:
        return None
    calls = d.get("kern:engine_decode_calls_total", 0)
    return {"prefill_s": d["kern:engine_step_seconds_total.prefill"], "decode_s": d["kern:engine_step_seconds_total.decode"],
            "host_s": d["kern:engine_step_seconds_total.host"], "wall_s": wall, "steps": d.get("kern:engine_steps_total", 0),
            "mixed_s": d.get("kern:engine_step_seconds_total.mixed", 0.0),
            "overlap_s": d.get("kern:engine_overlap_seconds_total", 0.0),
            "mixed_calls": d.get("kern:engine_mixed_calls_total", 0),
            "prefill_rows": d.get("kern:engine_prefill_rows_total", 0), "decode_calls": calls,
            "prefill_calls": d.get("kern:engine_prefill_calls_total", 0),
            "mean_decode_rows": d.get("kern:engine_decode_rows_total", 0) / calls if calls else 0.0}


def model_bytes(model_dir):
    """(weight bytes, KV bytes per token) of a Qwen3 checkpoint: its safetensors and config.json."""
    w = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return w, c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * hd * 2


def roofline(args, rep):
    """The level's bound in output tokens/s: N prompts prefilled at the prefill rate, then N * (out - 1)
    decode rows in steps of min(concurrency, N) sequences, each step reading the weights and the batch's
    KV (contexts at their mean, input + out / 2) at the copy bandwidth."""
    n, c = rep["requests"], rep["concurrency"]
    if not (args.model_dir and args.copy_gbps and args.prefill_tok_s and c):
        return None
    w, kvpt = model_bytes(args.model_dir)
    b = min(c, n)
    prefill_s = n * args.input_len / args.prefill_tok_s
    steps = n * (args.output_len - 1) / b
    step_s = (w + b * (args.input_len + args.output_len / 2) * kvpt) / (args.copy_gbps * 1e9)
    bound = n * args.output_len / (prefill_s + steps * step_s)
    return {"output_tok_per_s": bound, "prefill_s": prefill_s, "decode_step_ms": step_s * 1e3,
            "weight_bytes": w, "kv_bytes_per_token": kvpt, "copy_gbps": args.copy_gbps,
            "prefill_tok_per_s": args.prefill_tok_s}


async def prefix_test(args, n, rng):
    """One prompt of n tokens sent cold, then again: TTFT each and the cached tokens reported."""
    prompt = [rng.randrange(1000, args.vocab) for _ in range(n)]
    out = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout)) as session:
        for _ in range(2):
            res = []
            await one(session, args.url, args.model, prompt, 4, res)
            out.append(res[0])
    cold, warm = out
    rep = {"prefix_tokens": n, "cold_ttft_ms": cold.get("ttft", float("nan")) * 1e3,
           "warm_ttft_ms": warm.get("ttft", float("nan")) * 1e3, "warm_cached_tokens": warm.get("cached", 0),
           "failed": sum(not r["ok"] for r in out)}
    print(f"prefix cache: {n}-token prompt, TTFT cold {rep['cold_ttft_ms']:.1f} ms, warm {rep['warm_ttft_ms']:.1f} ms "
          f"({rep['warm_cached_tokens']} tokens cached)", flush=True)
    print("json " + json.dumps(rep), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--num-prompts", type=int, default=0, help="per run (default: 4 x concurrency, at least 16)")
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 8, 32, 64])
    ap.add_argument("--rate", type=float, default=0, help="also one Poisson run at this many requests/s")
    ap.add_argument("--vocab", type=int, default=150000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix-test", type=int, default=0, help="also: a prompt of this many tokens cold, then warm")
    ap.add_argument("--model-dir", help="the served checkpoint (weight bytes, KV bytes per token) for the roofline")
    ap.add_argument("--copy-gbps", type=float, default=0, help="measured copy bandwidth, GB/s (roofline)")
    ap.add_argument("--prefill-tok-s", type=float, default=0, help="measured prefill rate, tokens/s (roofline)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.prefix_test:
        asyncio.run(prefix_test(args, args.prefix_test, rng))
    runs = [(c, 0.0) for c in args.concurrency] + ([(0, args.rate)] if args.rate else [])
    n0 = args.num_prompts
    for c, rate in runs:
        args.num_prompts = n0 or max(16, 4 * c if c else 64)
        before = asyncio.run(engine_counters(args.url))
        rep = asyncio.run(run(args, c, rate, rng))
        split = engine_split(before, asyncio.run(engine_counters(args.url)), rep["wall_s"])
        if split:
            rep["engine"] = split
        roof = roofline(args, rep)
        if roof:
            rep["roofline"] = roof
        print(f"concurrency {c or '-'} rate {rate or '-'}: {rep['requests']} requests, {rep['failed']} failed, "
              f"{rep['req_per_s']:.2f} req/s, output {rep['output_tok_per_s']:.0f} tok/s, total {rep['total_tok_per_s']:.0f} tok/s; "
              f"TTFT mean/p50/p99 {rep['ttft_ms']['mean']:.1f}/{rep['ttft_ms']['p50']:.1f}/{rep['ttft_ms']['p99']:.1f} ms, "
              f"TPOT {rep['tpot_ms']['mean']:.2f}/{rep['tpot_ms']['p50']:.2f}/{rep['tpot_ms']['p99']:.2f} ms, "
              f"ITL {rep['itl_ms']['mean']:.2f}/{rep['itl_ms']['p50']:.2f}/{rep['itl_ms']['p99']:.2f} ms"
              + (f"; roofline {roof['output_tok_per_s']:.0f} output tok/s "
                 f"({rep['output_tok_per_s'] / roof['output_tok_per_s']:.2f} x)" if roof else ""), flush=True)
        if split:
            print(f"  engine: prefill {split['prefill_s']:.2f} s ({split['prefill_rows'] / max(split['prefill_s'], 1e-9):.0f} rows/s, "
                  f"{split['prefill_calls']:.0f} calls), "
                  f"decode {split['decode_s']:.2f} s ({split['decode_calls']:.0f} calls, mean {split['mean_decode_rows']:.1f} rows, "
                  f"{1e3 * split['decode_s'] / max(split['decode_calls'] - split['mixed_calls'], 1):.2f} ms each, "
                  f"sinks told meanwhile {split['overlap_s']:.2f} s), "
                  f"mixed {split['mixed_s']:.2f} s ({split['mixed_calls']:.0f} calls, "
                  f"{1e3 * split['mixed_s'] / max(split['mixed_calls'], 1):.2f} ms each), host {split['host_s']:.2f} s, "
                  f"idle {split['wall_s'] - split['prefill_s'] - split['decode_s'] - split['mixed_s'] - split['host_s']:.2f} s"
                  f" of {split['wall_s']:.2f} s",
                  flush=True)
        print("json " + json.dumps(rep), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
