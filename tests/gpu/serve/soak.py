#!/usr/bin/env python3
"""kern serve soak: CONCURRENCY streaming clients for SECONDS against a running server, random
prompt and output lengths, a fraction of them hanging up mid-stream (injected). Passes when no
request fails except the injected disconnects and, once idle, the pool holds no page but the
runner's padding page (run the server with --no-prefix-cache, so nothing else may hold one).

  python3 soak.py URL MODEL [SECONDS 120] [CONCURRENCY 256]
"""
import asyncio
import json
import random
import re
import sys
import time

import aiohttp

url, model = sys.argv[1], sys.argv[2]
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 120
concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 256
stats = {"completed": 0, "disconnected": 0, "failed": 0, "tokens": 0}
first_failure = []


async def worker(session, rng, until):
    while time.time() < until:
        prompt = [rng.randrange(1000, 150000) for _ in range(rng.randrange(1, 2000))]
        max_tokens = rng.randrange(1, 256)
        hang_up = rng.random() < 0.2
        hang_after = rng.randrange(1, max(2, max_tokens))
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
                "temperature": rng.choice([0, 0.7]), "seed": rng.randrange(1 << 30)}
        got = 0
        try:
            async with session.post(url + "/v1/completions", json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"status {r.status}: {(await r.text())[:200]}")
                done = False
                async for line in r.content:
                    if line.startswith(b"data: [DONE]"):
                        done = True
                        break
                    if line.startswith(b"data: "):
                        j = json.loads(line[6:])
                        if "error" in j:
                            raise RuntimeError(j["error"]["message"])
                        if j.get("choices"):
                            got += 1
                            if hang_up and got >= hang_after:
                                r.close()  # the client vanishes
                                stats["disconnected"] += 1
                                break
                else:
                    if not done and not hang_up:
                        raise RuntimeError("stream ended without [DONE]")
                if done:
                    stats["completed"] += 1
                stats["tokens"] += got
        except Exception as e:
            stats["failed"] += 1
            if not first_failure:
                first_failure.append(repr(e))


async def metric(session, name):
    async with session.get(url + "/metrics") as r:
        m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", await r.text(), re.M)
        return float(m.group(1))


async def main():
    rng = random.Random(7)
    until = time.time() + seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600), connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*(worker(s, random.Random(rng.randrange(1 << 30)), until) for _ in range(concurrency)))
        idle = False
        for _ in range(300):
            if await metric(s, "kern:num_requests_running") == 0 and await metric(s, "kern:num_requests_waiting") == 0:
                idle = True
                break
            await asyncio.sleep(0.1)
        used = await metric(s, "kern:kv_cache_used_pages")
        total = await metric(s, "kern:kv_cache_total_pages")
    print(f"[soak] {seconds:.0f} s x {concurrency} streams: {stats['completed']} completed, {stats['disconnected']} "
          f"disconnected on purpose, {stats['failed']} failed, {stats['tokens']} chunks; idle {idle}; "
          f"pages held at idle {used:.0f} of {total:.0f}" + (f"; first failure {first_failure[0]}" if first_failure else ""))
    ok = stats["failed"] == 0 and idle and used <= 1 and stats["completed"] > 0 and stats["disconnected"] > 0
    return 0 if ok else 1


sys.exit(asyncio.run(main()))
