#!/usr/bin/env python3
"""kern bench's PyTorch peer: the same dense Qwen3 shape in plain PyTorch, for speed only.

Random bf16 weights are created on the GPU from <hf-dir>/config.json (the numbers do not
matter: the peer measures time). Plain ops, no torch.compile, no custom kernels: embedding,
RMSNorm, fused q/k/v and gate/up linears, q/k RMSNorm, NeoX RoPE, a static KV cache
[layers, 2 (k, v), kv_heads, max_len, head_dim] written in place, F.scaled_dot_product_attention
with GQA, SiLU * up, lm_head on the last row, argmax on the GPU. The decode step at each context
C is captured in a torch.cuda.CUDAGraph (keys = exactly the C cached positions); prefill runs
eagerly, the whole prompt or in chunks.

--variant fast (default) keeps the launch count low: fused F.rms_norm, q and k normed and rotated
together from static RoPE tables (no gathers) straight back into the qkv buffer, one copy for k and
v into the cache, the residual adds folded into the o / down GEMMs (addmm_), and a lower-right
causal bias (flash) for later prefill chunks. --variant legacy is the earlier peer, op for op
(RMSNorm as eight f32 ops, RoPE gathered per call, index_copy_, an explicit boolean mask for later
chunks, which sends SDPA to the math backend), kept to measure the difference.

Prints and writes (--json FILE) the keys kern bench reads:
  {"device", "torch", "decode": [{"context", "replays", "gpu_step_us", "e2e_us"}],
   "prefill": [{"tokens", "chunk", "ms", "tokens_per_s"}]}
(plus "variant" and "sdpa", which kern bench ignores).
Exit status 3 when torch or a CUDA device is missing. --check compares the variants' logits on a
short prompt (chunked and whole, then one decode step) and exits 0 / 1; it runs on the CPU when
there is no CUDA device (use a small config there).
"""
import argparse
import contextlib
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_peer: torch is not installed", file=sys.stderr)
    sys.exit(3)


def sizes(text):
    out = [int(x) for x in text.split(",") if x]
    if not out or min(out) <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of positive integers")
    return out


def rms_f32(x, w, eps):
    """RMSNorm as separate ops (8 kernels: cast, pow, mean, add, rsqrt, mul, cast, mul)."""
    x32 = x.float()
    y = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return y if w is None else y * w


class LegacyOps:
    """The earlier peer's ops, unchanged: ~68 kernels per layer in a decode step."""

    name = "legacy"

    def __init__(self, m):
        self.m = m

    def prepare(self, T, pos, start, end):
        mask = None
        if T > 1 and start > 0:
            keys = torch.arange(end, device=self.m.dev)
            # [T, end] boolean: flash takes no mask and memory-efficient attention no GQA, so SDPA
            # falls back (math: K and V repeated per q head, scores materialized).
            mask = keys.unsqueeze(0) <= pos.unsqueeze(1)
        return dict(pos=pos, mask=mask)

    def norm(self, x, w):
        return rms_f32(x, w, self.m.eps)

    def rope(self, x, pos):  # x [T, heads, HD], NeoX halves; 12 kernels (two gathers included)
        m = self.m
        cos, sin = m.cos[pos].unsqueeze(1), m.sin[pos].unsqueeze(1)
        half = m.HD // 2
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).to(x.dtype)

    def qkv(self, l, lw, qkv, ctx, start, end):
        m, T = self.m, qkv.shape[0]
        q_w, kv_w = m.NH * m.HD, m.NKV * m.HD
        q = self.norm(qkv[:, :q_w].view(T, m.NH, m.HD), lw["q_norm"])
        k = self.norm(qkv[:, q_w:q_w + kv_w].view(T, m.NKV, m.HD), lw["k_norm"])
        v = qkv[:, q_w + kv_w:].view(T, m.NKV, m.HD)
        pos = ctx["pos"]
        q, k = self.rope(q, pos), self.rope(k, pos)
        m.kv[l, 0].index_copy_(1, pos, k.transpose(0, 1))
        m.kv[l, 1].index_copy_(1, pos, v.transpose(0, 1))
        return q

    def add_linear(self, h, x, w):  # GEMM, then the residual add: 2 kernels
        return h + F.linear(x, w)


class FastOps:
    """The same math in fewer launches: ~17 kernels per layer in a decode step."""

    name = "fast"

    def __init__(self, m):
        self.m = m

    def prepare(self, T, pos, start, end):
        m = self.m
        mask = None
        if T > 1 and start > 0:
            # Row i sees keys [0, start + i]: causal aligned to the bottom right, which flash takes
            # natively (CausalBias dispatches to it), GQA included. No mask tensor is built.
            from torch.nn.attention.bias import causal_lower_right
            mask = causal_lower_right(T, end)
        # Static slices of the tables (views, no gather kernels; in a graph they are fixed anyway).
        return dict(cos=m.cos_full[start:end].unsqueeze(1), sin=m.sin_signed[start:end].unsqueeze(1), mask=mask)  # [T, 1, HD]

    def norm(self, x, w):  # one fused kernel (aten::_fused_rms_norm on CUDA, f32 inside; torch >= 2.4)
        if not hasattr(F, "rms_norm"):
            return rms_f32(x, w, self.m.eps)
        return F.rms_norm(x, (x.shape[-1],), w, self.m.eps)

    def qkv(self, l, lw, qkv, ctx, start, end):
        m, T = self.m, qkv.shape[0]
        q_w = m.NH * m.HD
        qk = qkv[:, :q_w + m.NKV * m.HD].view(T, m.NH + m.NKV, m.HD)  # q heads then k heads
        # q and k together: rms over head_dim (no weight, 1 kernel), the per-head weights (q_norm
        # on the q heads, k_norm on the k heads, 1 kernel), then RoPE as y*cos + swap(y)*sin with
        # sin's first half negated (cat + mul + addcmul: 3 kernels), stored into qkv itself. bf16
        # tables, as Hugging Face's Qwen3 casts cos / sin to the activations' dtype (one dtype
        # throughout also keeps addcmul's out= free of casts).
        y = self.norm(qk, None) * lw["qk_norm"]
        half = m.HD // 2
        swapped = torch.cat((y[..., half:], y[..., :half]), -1)
        torch.addcmul(y * ctx["cos"], swapped, ctx["sin"], out=qk)
        # k and v are adjacent in qkv: one copy into the cache's static slice.
        m.kv[l, :, :, start:end].copy_(qkv[:, q_w:].view(T, 2, m.NKV, m.HD).permute(1, 2, 0, 3))
        return qkv[:, :q_w].view(T, m.NH, m.HD)

    def add_linear(self, h, x, w):  # h += x @ w.T: the residual add is the GEMM's beta = 1 (1 kernel)
        return h.addmm_(x, w.t())


VARIANTS = {"fast": FastOps, "legacy": LegacyOps}


class Qwen3Peer:
    def __init__(self, cfg, max_len, device, variant="fast", norm_spread=0.05):
        self.dev = device
        self.H = cfg["hidden_size"]
        self.I = cfg["intermediate_size"]
        self.L = cfg["num_hidden_layers"]
        self.NH = cfg["num_attention_heads"]
        self.NKV = cfg["num_key_value_heads"]
        self.HD = cfg.get("head_dim", self.H // self.NH)
        self.V = cfg["vocab_size"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 1000000.0))
        tied = cfg.get("tie_word_embeddings", False)
        bf = torch.bfloat16

        def w(*shape):
            return torch.randn(*shape, device=device, dtype=bf) * 0.02

        def norm(n):
            return 1.0 + norm_spread * torch.randn(n, device=device, dtype=bf)

        self.embed = w(self.V, self.H)
        self.lm_head = self.embed if tied else w(self.V, self.H)
        self.final_norm = norm(self.H)
        q, kv = self.NH * self.HD, self.NKV * self.HD
        self.layers = []
        for _ in range(self.L):
            lw = dict(in_norm=norm(self.H), qkv=w(q + 2 * kv, self.H), q_norm=norm(self.HD),
                      k_norm=norm(self.HD), o=w(self.H, q), post_norm=norm(self.H),
                      gate_up=w(2 * self.I, self.H), down=w(self.H, self.I))
            lw["qk_norm"] = torch.cat((lw["q_norm"].expand(self.NH, self.HD), lw["k_norm"].expand(self.NKV, self.HD)))
            self.layers.append(lw)
        # kv[l, 0] / kv[l, 1] are [kv_heads, max_len, HD] blocks: the earlier k_cache[l, 0] / v_cache[l, 0].
        self.kv = torch.zeros(self.L, 2, self.NKV, max_len, self.HD, device=device, dtype=bf)
        inv = 1.0 / (theta ** (torch.arange(0, self.HD, 2, device=device, dtype=torch.float32) / self.HD))
        ang = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        self.cos, self.sin = ang.cos(), ang.sin()  # [max_len, HD / 2]
        self.cos_full = torch.cat((self.cos, self.cos), -1).to(bf)  # [max_len, HD], for the fast variant
        self.sin_signed = torch.cat((-self.sin, self.sin), -1).to(bf)
        self.set_variant(variant)

    def set_variant(self, name):
        self.ops = VARIANTS[name](self)

    def forward(self, tokens, pos, start, end, logits=False):
        """Rows `tokens` at positions `pos` (= start..end-1); attends to cache[:end]. Returns the argmax token."""
        ops, T = self.ops, tokens.shape[0]
        h = F.embedding(tokens, self.embed)
        ctx = ops.prepare(T, pos, start, end)
        for l, lw in enumerate(self.layers):
            qkv = F.linear(ops.norm(h, lw["in_norm"]), lw["qkv"])
            q = ops.qkv(l, lw, qkv, ctx, start, end)  # [T, NH, HD], normed and rotated; k, v cached
            qq = q.transpose(0, 1).unsqueeze(0)  # [1, NH, T, HD]
            kk, vv = self.kv[l, 0:1, :, :end], self.kv[l, 1:2, :, :end]  # [1, NKV, end, HD]: valid keys only
            # GQA stays native (enable_gqa): flash takes kv_heads < heads, and for one query row it
            # folds the q heads of a group into rows (one split-KV pass over each kv head's keys);
            # repeat_interleave would copy the whole prefix 4x per step. No mask for a single row
            # or a whole prompt (is_causal), so the flash backend runs.
            if T == 1:
                o = F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=True)
            elif start == 0:
                o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True)
            else:
                o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=ctx["mask"], enable_gqa=True)
            h = ops.add_linear(h, o[0].transpose(0, 1).reshape(T, self.NH * self.HD), lw["o"])
            g, u = F.linear(ops.norm(h, lw["post_norm"]), lw["gate_up"]).chunk(2, -1)
            h = ops.add_linear(h, F.silu(g) * u, lw["down"])
        out = F.linear(ops.norm(h[-1:], self.final_norm), self.lm_head)
        return out if logits else torch.argmax(out, -1)


def bench_decode(m, context, replays):
    dev = m.dev
    tok = torch.full((1,), context % m.V, device=dev, dtype=torch.long)
    pos = torch.full((1,), context - 1, device=dev, dtype=torch.long)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            m.forward(tok, pos, context - 1, context)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = m.forward(tok, pos, context - 1, context)
    graph.replay()
    torch.cuda.synchronize()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    marks[0].record()
    for i in range(replays):
        graph.replay()
        marks[i + 1].record()
    torch.cuda.synchronize()
    step_ms = [marks[i].elapsed_time(marks[i + 1]) for i in range(replays)]
    # Host loop per token: write the input token, replay, read the 8-byte token back.
    e2e_ms, host_tok = [], int(out.item())
    last = time.perf_counter()
    for _ in range(replays):
        tok.fill_(host_tok)
        graph.replay()
        host_tok = int(out.item())
        now = time.perf_counter()
        e2e_ms.append((now - last) * 1e3)
        last = now
    del graph
    return dict(context=context, replays=replays, gpu_step_us=statistics.median(step_ms) * 1e3,
                e2e_us=statistics.median(e2e_ms) * 1e3)


def prompt(m, tokens):
    ids = (torch.arange(tokens, device=m.dev, dtype=torch.long) * 7919 + 13) % m.V
    return ids, torch.arange(tokens, device=m.dev, dtype=torch.long)


def run_prompt(m, ids, allpos, chunk, logits=False):
    out = None
    for s in range(0, ids.shape[0], chunk):
        e = min(ids.shape[0], s + chunk)
        out = m.forward(ids[s:e], allpos[s:e], s, e, logits)
    return out


def bench_prefill(m, tokens, chunk, reps):
    ids, allpos = prompt(m, tokens)
    int(run_prompt(m, ids, allpos, chunk).item())  # warm-up
    ms = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        int(run_prompt(m, ids, allpos, chunk).item())
        ms.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(ms)
    return dict(tokens=tokens, chunk=chunk, ms=med, tokens_per_s=tokens / (med * 1e-3))


def check(m, tokens=97, chunk=40):
    """Both variants on one prompt: prefill tokens-1 rows (whole, or in chunks: the masked path),
    then one decode row; the last row's logits against legacy-whole by cosine similarity."""
    ids, allpos = prompt(m, tokens)
    n = tokens - 1

    def logits(variant, c):
        m.set_variant(variant)
        run_prompt(m, ids[:n], allpos[:n], c)
        return m.forward(ids[n:], allpos[n:], n, tokens, logits=True).float().flatten()

    ref = logits("legacy", n)
    ok = True
    for variant, c in (("legacy", chunk), ("fast", n), ("fast", chunk)):
        got = logits(variant, c)
        cos = F.cosine_similarity(got, ref, dim=0).item()
        same = int(got.argmax()) == int(ref.argmax())
        good = cos > 0.99
        ok = ok and good
        print(f"torch_peer: check {variant} chunk {c}: cosine {cos:.5f} vs legacy whole, "
              f"max |diff| {(got - ref).abs().max().item():.4g}, argmax {'same' if same else 'differs'}"
              f" -> {'ok' if good else 'FAIL'}", file=sys.stderr, flush=True)
    return ok


def sdpa_scope(name):
    """auto: torch's own backend order. Otherwise that backend first, the rest as fallbacks.
    (A lower-right CausalBias dispatches to flash directly whenever flash can run.)"""
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    order = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    first = order[name]
    return sdpa_kernel([first] + [b for b in order.values() if b != first], set_priority=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="config.json of the Qwen3 checkpoint")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--contexts", type=sizes, default=[128, 1024, 8192, 32768])
    ap.add_argument("--prefill", type=sizes, default=[512, 2048, 8192])
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="fast",
                    help="fast (default): few launches per layer; legacy: the earlier peer, op for op")
    ap.add_argument("--sdpa", choices=["auto", "flash", "cudnn", "efficient", "math"], default="auto",
                    help="SDPA backend to try first (default auto: torch's order)")
    ap.add_argument("--check", action="store_true",
                    help="compare the variants' logits on a short prompt and exit (0 ok, 1 not); CPU without CUDA")
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    if a.check:
        dev = torch.device("cuda", a.gpu) if torch.cuda.is_available() else torch.device("cpu")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        m = Qwen3Peer(cfg, 128, dev, "legacy", norm_spread=0.5)  # norm weights far from 1: mix-ups show
        with torch.inference_mode(), sdpa_scope(a.sdpa):
            sys.exit(0 if check(m) else 1)
    if not torch.cuda.is_available():
        print("torch_peer: torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    dev = torch.device("cuda", a.gpu)
    torch.cuda.set_device(dev)
    max_len = max(max(a.contexts), max(a.prefill))
    m = Qwen3Peer(cfg, max_len, dev, a.variant)
    report = dict(device=torch.cuda.get_device_name(dev), torch=torch.__version__, variant=a.variant,
                  sdpa=a.sdpa, decode=[], prefill=[])
    with torch.inference_mode(), sdpa_scope(a.sdpa):
        for c in a.contexts:
            report["decode"].append(bench_decode(m, c, a.replays))
            print(f"torch_peer: decode {report['decode'][-1]}", file=sys.stderr, flush=True)
        for n in a.prefill:
            for chunk in ([n, a.chunk] if a.chunk < n else [n]):
                report["prefill"].append(bench_prefill(m, n, chunk, a.reps))
                print(f"torch_peer: prefill {report['prefill'][-1]}", file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
