// kern serve --fake-engine against the official OpenAI client library (npm `openai`) and raw
// HTTP: completions (one prompt and a batch) and chat, streaming and not, stop strings, n, log-probs, usage, errors with
// the right status, bad input answered while the server keeps serving, a client that vanishes
// mid-stream, the API key, /metrics, and SIGTERM draining to exit 0.
// Usage: node openai_client_test.mjs <kern binary> <tokenizer.json> <node_modules dir>
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { createRequire } from "node:module";

const [kern, tokenizer, modules] = process.argv.slice(2);
if (!kern || !tokenizer || !modules) {
  console.error("usage: node openai_client_test.mjs KERN TOKENIZER_JSON NODE_MODULES");
  process.exit(2);
}
let OpenAI;
try {
  const req = createRequire(path.join(path.resolve(modules), "x.js"));
  const mod = req("openai");
  OpenAI = mod.default ?? mod.OpenAI ?? mod;
} catch (e) {
  console.error(`the npm package 'openai' is not installed under ${modules} (bash scripts/setup-openai-client.sh): ${e.message}`);
  process.exit(1);
}

function start(extra = []) {
  return new Promise((resolve, reject) => {
    const p = spawn(kern, ["serve", "--fake-engine", "--tokenizer", tokenizer, "--port", "0", "--fake-step-us", "200", "--request-timeout", "1", ...extra], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "", err = "";
    const timer = setTimeout(() => reject(new Error(`kern serve did not start: ${err}`)), 30000);
    p.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/ready on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, port: Number(m[1]), stderr: () => err });
      }
    });
    p.stderr.on("data", (d) => (err += d));
    p.on("exit", (code) => reject(new Error(`kern serve exited ${code}: ${err}`)));
  });
}

function stop(server) {
  return new Promise((resolve) => {
    server.proc.removeAllListeners("exit");
    server.proc.on("exit", (code, signal) => resolve({ code, signal }));
    server.proc.kill("SIGTERM");
  });
}

// One raw HTTP exchange: writes `bytes`, returns the status line's code (0 when closed without one).
function raw(port, bytes, { wait = 15000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let got = "";
    const t = setTimeout(() => { s.destroy(); resolve({ status: -1, body: got }); }, wait);
    s.on("data", (d) => (got += d.toString("latin1")));
    s.on("close", () => {
      clearTimeout(t);
      const m = got.match(/^HTTP\/1\.1 (\d{3})/);
      resolve({ status: m ? Number(m[1]) : 0, body: got });
    });
    s.on("error", () => {});
    s.write(bytes);
  });
}

const results = [];
async function check(name, f) {
  try {
    await f();
    results.push([true, name]);
    console.log(`ok - ${name}`);
  } catch (e) {
    results.push([false, name]);
    console.log(`not ok - ${name}\n  ${e.stack ?? e}`);
  }
}

async function statusOf(p) {
  try {
    await p;
    return 200;
  } catch (e) {
    return e.status ?? -1;
  }
}

const server = await start();
const base = `http://127.0.0.1:${server.port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });

await check("GET /v1/models lists the served model", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ["fake"]);
  assert.equal(list.data[0].object, "model");
});

let reference = "";
await check("completions: whole response, usage, finish_reason length", async () => {
  const r = await client.completions.create({ model: "fake", prompt: "The quick brown fox", max_tokens: 24, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.match(r.id, /^cmpl-[0-9a-f]{32}$/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 24);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 24);
  assert.ok(r.choices[0].text.length > 0);
  reference = r.choices[0].text;
});

await check("completions: the stream's text equals the whole response's", async () => {
  const s = await client.completions.create({ model: "fake", prompt: "The quick brown fox", max_tokens: 24, temperature: 0, stream: true });
  let text = "", finish = null, chunks = 0;
  for await (const c of s) {
    chunks++;
    text += c.choices[0]?.text ?? "";
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(text, reference);
  assert.equal(finish, "length");
  assert.ok(chunks >= 2);
});

await check("completions: a stop string ends the text before it and is never sent", async () => {
  const cut = Math.floor(reference.length / 2);
  const stop = reference.slice(cut, cut + 4);
  const before = reference.slice(0, reference.indexOf(stop));
  const r = await client.completions.create({ model: "fake", prompt: "The quick brown fox", max_tokens: 24, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].text, before);
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await client.completions.create({ model: "fake", prompt: "The quick brown fox", max_tokens: 24, temperature: 0, stop, stream: true });
  let text = "";
  for await (const c of s) text += c.choices[0]?.text ?? "";
  assert.equal(text, before);
});

let chatText = "";
await check("chat: whole response through the model's chat template", async () => {
  const r = await client.chat.completions.create({
    model: "fake", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], max_tokens: 16, temperature: 0,
  });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.usage.completion_tokens, 16);
  assert.ok(r.usage.prompt_tokens > 5, "the template wraps the messages");
  chatText = (r.choices[0].message.reasoning_content ?? "") + "|" + r.choices[0].message.content;
});

await check("chat: stream with include_usage (role first, usage last, same text)", async () => {
  const s = await client.chat.completions.create({
    model: "fake", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], max_tokens: 16, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let content = "", reasoning = "", first = null, usage = null, finish = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    const d = c.choices[0].delta;
    if (first === null) first = d.role;
    content += d.content ?? "";
    reasoning += d.reasoning_content ?? "";
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(first, "assistant");
  assert.equal(finish, "length");
  assert.ok(usage && usage.completion_tokens === 16);
  assert.equal(reasoning + "|" + content, chatText);
});

await check("chat: n = 3 seeded samples, each its own choice; the same seed repeats", async () => {
  const ask = () => client.chat.completions.create({ model: "fake", messages: [{ role: "user", content: "Pick." }], max_tokens: 8, n: 3, seed: 5, temperature: 0.8 });
  const a = await ask(), b = await ask();
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(a.usage.completion_tokens, 24);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  assert.notEqual(a.choices[0].message.content, a.choices[1].message.content);
});

await check("chat: logprobs with top_logprobs", async () => {
  const r = await client.chat.completions.create({ model: "fake", messages: [{ role: "user", content: "x" }], max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 5);
  for (const t of lp) {
    assert.equal(typeof t.logprob, "number");
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(Array.isArray(t.bytes));
  }
});

await check("completions: echo with logprobs scores the prompt (first entry null), whole and streamed alike", async () => {
  const prompt = "The quick brown fox";
  const tok = await (await fetch(`${base}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json" },
                                                      body: JSON.stringify({ model: "fake", prompt }) })).json();
  const n = tok.tokens.length;
  assert.ok(n >= 2);
  const r = await client.completions.create({ model: "fake", prompt, max_tokens: 4, temperature: 0, echo: true, logprobs: 2 });
  const c = r.choices[0];
  assert.ok(c.text.startsWith(prompt));
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, n + 4);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  // The fake engine's scored positions say where they were: position i - 1 gives -(i / 8).
  for (let i = 1; i < n; ++i) {
    assert.equal(lp.token_logprobs[i], -i / 8, `prompt token ${i}`);
    assert.equal(Object.keys(lp.top_logprobs[i]).length <= 2, true);
  }
  for (let i = n; i < n + 4; ++i) assert.equal(typeof lp.token_logprobs[i], "number");
  assert.equal(lp.tokens.slice(0, n).join(""), prompt);
  assert.equal(lp.text_offset[0], 0);
  // The generated text is what the same request gives without echo.
  const plain = await client.completions.create({ model: "fake", prompt, max_tokens: 4, temperature: 0 });
  assert.equal(c.text, prompt + plain.choices[0].text);
  const s = await client.completions.create({ model: "fake", prompt, max_tokens: 4, temperature: 0, echo: true, logprobs: 2, stream: true });
  const tokens = [], values = [];
  let text = "";
  for await (const ch of s) {
    text += ch.choices[0]?.text ?? "";
    const l = ch.choices[0]?.logprobs;
    if (l) { tokens.push(...l.tokens); values.push(...l.token_logprobs); }
  }
  assert.equal(text, c.text);
  assert.deepEqual(tokens, lp.tokens);
  assert.deepEqual(values, lp.token_logprobs);
  // max_tokens 0 scores the prompt only (how scoring clients call it): nothing generated, "length".
  const z = await client.completions.create({ model: "fake", prompt, max_tokens: 0, echo: true, logprobs: 1 });
  assert.equal(z.choices[0].text, prompt);
  assert.equal(z.choices[0].finish_reason, "length");
  assert.equal(z.usage.completion_tokens, 0);
  assert.deepEqual(z.choices[0].logprobs.tokens, lp.tokens.slice(0, n));
  assert.deepEqual(z.choices[0].logprobs.token_logprobs, lp.token_logprobs.slice(0, n));
  assert.equal(await statusOf(client.completions.create({ model: "fake", prompt, max_tokens: 0 })), 400);
});

await check("completions: a batch of prompts gives n choices each at p·n + i, each as its prompt alone, whole and streamed", async () => {
  const prompts = ["The quick brown fox", "Once upon a time", "1 2 3"];
  const alone = [];
  let promptTokens = 0;
  for (const p of prompts) {
    const a = await client.completions.create({ model: "fake", prompt: p, max_tokens: 6, temperature: 0 });
    alone.push(a.choices[0].text);
    promptTokens += a.usage.prompt_tokens;
  }
  assert.notEqual(alone[0], alone[1]);
  const r = await client.completions.create({ model: "fake", prompt: prompts, max_tokens: 6, temperature: 0, n: 2 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3, 4, 5]);
  for (let i = 0; i < 6; ++i) assert.equal(r.choices[i].text, alone[Math.floor(i / 2)], `choice ${i}`);
  assert.equal(r.usage.prompt_tokens, promptTokens);
  assert.equal(r.usage.completion_tokens, 36);
  const s = await client.completions.create({ model: "fake", prompt: prompts, max_tokens: 6, temperature: 0, n: 2, stream: true,
                                               stream_options: { include_usage: true } });
  const text = Array(6).fill(""), finish = Array(6).fill(null);
  let usage = null;
  for await (const c of s) {
    for (const ch of c.choices) {
      text[ch.index] += ch.text ?? "";
      if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
    }
    if (c.usage) usage = c.usage;
  }
  assert.deepEqual(text, r.choices.map((c) => c.text));
  assert.deepEqual(finish, Array(6).fill("length"));
  assert.equal(usage.prompt_tokens, promptTokens);
  assert.equal(usage.completion_tokens, 36);
  // token-id prompts: the same texts; echo (with the prompts' log-probs): each choice leads with its own prompt
  const ids = [];
  for (const p of prompts)
    ids.push((await (await fetch(`${base}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json" },
                                                       body: JSON.stringify({ model: "fake", prompt: p }) })).json()).tokens);
  const t = await client.completions.create({ model: "fake", prompt: ids, max_tokens: 6, temperature: 0 });
  assert.deepEqual(t.choices.map((c) => c.text), alone);
  const e = await client.completions.create({ model: "fake", prompt: prompts, max_tokens: 2, temperature: 0, echo: true, logprobs: 1 });
  for (let i = 0; i < 3; ++i) {
    assert.ok(e.choices[i].text.startsWith(prompts[i]), `choice ${i}`);
    assert.equal(e.choices[i].logprobs.tokens.slice(0, ids[i].length).join(""), prompts[i]);
    assert.equal(e.choices[i].logprobs.token_logprobs[0], null);
  }
  // a batch of more samples than the waiting queue holds (1,024) could never be queued: 400, not 429
  await assert.rejects(client.completions.create({ model: "fake", prompt: Array(200).fill("x"), n: 8, max_tokens: 1 }),
                       (e) => e.status === 400 && e.error?.param === "prompt" && /1600 samples/.test(e.error?.message));
  // one bad prompt refuses the whole batch, naming it
  await assert.rejects(client.completions.create({ model: "fake", prompt: ["x", 7], max_tokens: 2 }), (e) => e.status === 400 && e.error?.param === "prompt");
  await assert.rejects(client.completions.create({ model: "fake", prompt: ["x", "y"], max_tokens: 10000000 }),
                       (e) => e.status === 400 && e.error?.param === "max_tokens" && /prompt\[0\]/.test(e.error?.message));
});

await check("errors: unknown model 404, out-of-range field 400, the right error types", async () => {
  await assert.rejects(client.completions.create({ model: "nope", prompt: "x" }), (e) => e.status === 404 && e.error?.code === "model_not_found");
  await assert.rejects(client.completions.create({ model: "fake", prompt: "x", temperature: 5 }), (e) => e.status === 400 && e.error?.param === "temperature");
  await assert.rejects(client.completions.create({ model: "fake", prompt: "x", max_tokens: 10000000 }), (e) => e.status === 400);
  assert.equal(await statusOf(client.chat.completions.create({ model: "fake", messages: [], max_tokens: 2 })), 400);
});

await check("bad input over raw HTTP: malformed JSON, wrong type, invalid UTF-8, huge body, unknown route", async () => {
  const post = (p, body, headers = "") =>
    raw(server.port, `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body, "latin1")}\r\nConnection: close\r\n${headers}\r\n` + body);
  assert.equal((await post("/v1/completions", '{"model": "fake", "prompt": ')).status, 400);
  assert.equal((await post("/v1/completions", '{"model": "fake", "prompt": 7}')).status, 400);
  assert.equal((await post("/v1/completions", '{"model": "fake", "prompt": "\xff\xfe"}')).status, 400);
  assert.equal((await raw(server.port, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n`)).status, 413);
  assert.equal((await post("/v2/nothing", "{}")).status, 404);
  assert.equal((await raw(server.port, "GET /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).status, 405);
  assert.equal((await raw(server.port, "NOT HTTP AT ALL\r\n\r\n")).status, 400);
});

await check("a client that sends half a request and stalls gets 408 and is closed; others are served meanwhile", async () => {
  const t0 = Date.now();
  const stalled = raw(server.port, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"model": "fake", "pro`);
  const other = await client.completions.create({ model: "fake", prompt: "while it stalls", max_tokens: 3, temperature: 0 });
  assert.equal(other.usage.completion_tokens, 3);
  const r = await stalled;
  assert.equal(r.status, 408, r.body);
  const waited = Date.now() - t0;
  assert.ok(waited >= 900 && waited < 10000, `answered after ${waited} ms (--request-timeout 1)`);
});

await check("penalties reach the model: a penalized request repeats and differs from the unpenalized one", async () => {
  const ask = (extra) => client.completions.create({ model: "fake", prompt: "Count", max_tokens: 12, temperature: 0, ...extra });
  const plain = await ask({});
  const a = await ask({ presence_penalty: 1.0, frequency_penalty: 0.5 }), b = await ask({ presence_penalty: 1.0, frequency_penalty: 0.5 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, plain.choices[0].text);
  assert.equal(a.usage.completion_tokens, 12);
  await assert.rejects(ask({ presence_penalty: 3 }), (e) => e.status === 400 && e.error?.param === "presence_penalty");
});

await check("a client that vanishes mid-stream frees its request; others are served meanwhile", async () => {
  const ac = new AbortController();
  const s = await client.completions.create({ model: "fake", prompt: "long", max_tokens: 5000, temperature: 0, stream: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const c of s) if (++n === 3) ac.abort();
  } catch (e) { /* aborted */ }
  const other = await client.completions.create({ model: "fake", prompt: "short", max_tokens: 3, temperature: 0 });
  assert.equal(other.usage.completion_tokens, 3);
  let running = -1;
  for (let i = 0; i < 100 && running !== 0; i++) {
    const m = await (await fetch(`${base}/metrics`)).text();
    running = Number(m.match(/^kern:num_requests_running\{[^}]*\} (\S+)$/m)[1]);
    if (running !== 0) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(running, 0, "the vanished stream's sequence ended");
});

await check("/health 200 and /metrics in Prometheus text with the expected names", async () => {
  assert.equal((await fetch(`${base}/health`)).status, 200);
  const m = await (await fetch(`${base}/metrics`)).text();
  for (const name of ["kern:num_requests_running", "kern:num_requests_waiting", "kern:kv_cache_usage_perc", "kern:prefix_cache_queries_total",
    "kern:prefix_cache_hits_total", "kern:num_preemptions_total", "kern:prompt_tokens_total", "kern:generation_tokens_total",
    "kern:time_to_first_token_seconds_bucket", "kern:time_per_output_token_seconds_count", "kern:e2e_request_latency_seconds_sum",
    "kern:request_queue_time_seconds_count", 'kern:engine_step_seconds_total{model_name="fake",phase="decode"}',
    "kern:engine_decode_rows_total"])
    assert.ok(m.includes(name), name);
  const gen = Number(m.match(/^kern:generation_tokens_total\{[^}]*\} (\S+)$/m)[1]);
  assert.ok(gen > 100, `generated ${gen}`);
});

await check("a repeated prompt reports cached tokens from the prefix index", async () => {
  const prompt = "shared prefix ".repeat(40);
  await client.completions.create({ model: "fake", prompt, max_tokens: 2, temperature: 0 });
  const r = await client.completions.create({ model: "fake", prompt, max_tokens: 2, temperature: 0 });
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(r.usage));
  // At idle the prefix cache still holds pages, but kv_cache_usage_perc counts only what running
  // requests hold (as vLLM counts cached free blocks as free).
  let m = "";
  for (let i = 0; i < 100; i++) {
    m = await (await fetch(`${base}/metrics`)).text();
    if (Number(m.match(/^kern:num_requests_running\{[^}]*\} (\S+)$/m)[1]) === 0) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const gauge = (name) => Number(m.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m"))[1]);
  assert.equal(gauge("kern:kv_cache_usage_perc"), 0, m);
  assert.ok(gauge("kern:kv_cache_used_pages") > 0, m);
});

await check("completions: logit_bias reaches the model (fake: +100 makes every token that id); bad keys are 400s", async () => {
  const r = await client.completions.create({ model: "fake", prompt: "Hello", max_tokens: 6, logit_bias: { "42": 100, "7": -100 } });
  const d = await (await fetch(`${base}/detokenize`, { method: "POST", body: JSON.stringify({ tokens: Array(6).fill(42) }) })).json();
  assert.equal(r.choices[0].text, d.prompt);
  assert.equal(r.usage.completion_tokens, 6);
  const c = await client.chat.completions.create({ model: "fake", messages: [{ role: "user", content: "hi" }], max_tokens: 3,
                                                   logit_bias: { "42": 100 } });
  assert.equal(c.usage.completion_tokens, 3);
  for (const bad of [{ "-1": 5 }, { "x": 5 }, { "42": 101 }, { "42": "5" }]) {
    try {
      await client.completions.create({ model: "fake", prompt: "Hello", max_tokens: 2, logit_bias: bad });
      assert.fail(`accepted ${JSON.stringify(bad)}`);
    } catch (e) {
      assert.equal(e.status, 400, JSON.stringify(bad));
      assert.match(e.error?.param ?? e.param ?? "", /^logit_bias\./);
    }
  }
});

await check("/tokenize and /detokenize round-trip", async () => {
  const t = await (await fetch(`${base}/tokenize`, { method: "POST", body: JSON.stringify({ prompt: "Hello world" }) })).json();
  assert.ok(t.count >= 2 && t.tokens.length === t.count);
  const d = await (await fetch(`${base}/detokenize`, { method: "POST", body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.prompt, "Hello world");
});

await check("SIGTERM drains and exits 0", async () => {
  const r = await stop(server);
  assert.equal(r.code, 0, server.stderr());
});

const keyed = await start(["--api-key", "sekrit"]);
await check("--api-key: 401 without it, served with it", async () => {
  const bare = new OpenAI({ baseURL: `http://127.0.0.1:${keyed.port}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bare.models.list(), (e) => e.status === 401);
  const good = new OpenAI({ baseURL: `http://127.0.0.1:${keyed.port}/v1`, apiKey: "sekrit", maxRetries: 0 });
  const r = await good.completions.create({ model: "fake", prompt: "hi", max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
});
await stop(keyed);

// --host-gib: a pool of 2,048 tokens fills with four other prompts' pages, the first prompt's entry is
// parked on the host tier instead of dropped, and the first prompt sent again starts from it.
const tiered = await start(["--fake-capacity", "2048", "--host-gib", "0.001"]);
await check("--host-gib: a cold prefix parked on the host tier serves a later prompt", async () => {
  const c = new OpenAI({ baseURL: `http://127.0.0.1:${tiered.port}/v1`, apiKey: "none", maxRetries: 0 });
  const words = (tag) => Array.from({ length: 160 }, (_, i) => `${tag}${i}`).join(" ");
  const first = await c.completions.create({ model: "fake", prompt: words("alpha"), max_tokens: 2, temperature: 0 });
  assert.ok(first.usage.prompt_tokens > 300 && first.usage.prompt_tokens < 1000, JSON.stringify(first.usage));
  for (const tag of ["bravo", "charlie", "delta", "echo"])
    await c.completions.create({ model: "fake", prompt: words(tag), max_tokens: 2, temperature: 0 });
  const again = await c.completions.create({ model: "fake", prompt: words("alpha"), max_tokens: 2, temperature: 0 });
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 256, JSON.stringify(again.usage));
  const m = await (await fetch(`http://127.0.0.1:${tiered.port}/metrics`)).text();
  const metric = (name) => Number(m.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m"))[1]);
  assert.ok(metric("kern:host_tier_parks_total") >= 1, m);
  assert.ok(metric("kern:host_tier_wakes_total") >= 1, m);
});
await stop(tiered);

const failed = results.filter(([ok]) => !ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
