#!/usr/bin/env python3
"""kern bench's PyTorch peer: the same dense Qwen3 shape in eager PyTorch, for speed only.

Random bf16 weights are created on the GPU from <hf-dir>/config.json (the numbers do not
matter: the peer measures time). Eager ops: embedding, RMSNorm, fused q/k/v and gate/up linears,
q/k RMSNorm, NeoX RoPE, a static KV cache written in place, F.scaled_dot_product_attention with
GQA, SiLU * up, lm_head on the last row, argmax. The decode step at each context is captured in
a torch.cuda.CUDAGraph; prefill runs eagerly, the whole prompt or in chunks.

Prints and writes (--json FILE) the keys kern bench reads:
  {"device", "torch", "decode": [{"context", "replays", "gpu_step_us", "e2e_us"}],
   "prefill": [{"tokens", "chunk", "ms", "tokens_per_s"}]}
Exit status 3 when torch or a CUDA device is missing.
"""
import argparse
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


class Qwen3Peer:
    def __init__(self, cfg, max_len, device):
        self.dev = device
        self.H = cfg["hidden_size"]
        self.I = cfg["intermediate_size"]
        self.L = cfg["num_hidden_layers"]
        self.NH = cfg["num_attention_heads"]
        self.NKV = cfg["num_key_value_heads"]
        self.HD = cfg.get("head_dim", self.H // self.NH)
        self.V = cfg["vocab_size"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = cfg.get("rope_theta", 1000000.0)
        tied = cfg.get("tie_word_embeddings", False)
        bf = torch.bfloat16

        def w(*shape):
            return torch.randn(*shape, device=device, dtype=bf) * 0.02

        def norm(n):
            return 1.0 + 0.05 * torch.randn(n, device=device, dtype=bf)

        self.embed = w(self.V, self.H)
        self.lm_head = self.embed if tied else w(self.V, self.H)
        self.final_norm = norm(self.H)
        q, kv = self.NH * self.HD, self.NKV * self.HD
        self.layers = []
        for _ in range(self.L):
            self.layers.append(dict(in_norm=norm(self.H), qkv=w(q + 2 * kv, self.H), q_norm=norm(self.HD),
                                    k_norm=norm(self.HD), o=w(self.H, q), post_norm=norm(self.H),
                                    gate_up=w(2 * self.I, self.H), down=w(self.H, self.I)))
        self.k_cache = torch.zeros(self.L, 1, self.NKV, max_len, self.HD, device=device, dtype=bf)
        self.v_cache = torch.zeros_like(self.k_cache)
        inv = 1.0 / (theta ** (torch.arange(0, self.HD, 2, device=device, dtype=torch.float32) / self.HD))
        ang = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        self.cos, self.sin = ang.cos(), ang.sin()

    def rms(self, x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def rope(self, x, pos):  # x [T, heads, HD], NeoX halves
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        half = self.HD // 2
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).to(x.dtype)

    def forward(self, tokens, pos, start, end):
        """Rows `tokens` at positions `pos` (= start..end-1); attends to cache[:end]. Returns the argmax token."""
        T = tokens.shape[0]
        q_w, kv_w = self.NH * self.HD, self.NKV * self.HD
        h = F.embedding(tokens, self.embed)
        mask = None
        if T > 1 and start > 0:
            keys = torch.arange(end, device=self.dev)
            mask = keys.unsqueeze(0) <= pos.unsqueeze(1)  # [T, end]
        for l, lw in enumerate(self.layers):
            x = self.rms(h, lw["in_norm"])
            qkv = F.linear(x, lw["qkv"])
            q = self.rms(qkv[:, :q_w].view(T, self.NH, self.HD), lw["q_norm"])
            k = self.rms(qkv[:, q_w:q_w + kv_w].view(T, self.NKV, self.HD), lw["k_norm"])
            v = qkv[:, q_w + kv_w:].view(T, self.NKV, self.HD)
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.k_cache[l, 0].index_copy_(1, pos, k.transpose(0, 1))
            self.v_cache[l, 0].index_copy_(1, pos, v.transpose(0, 1))
            kk, vv = self.k_cache[l, :, :, :end], self.v_cache[l, :, :, :end]
            qq = q.transpose(0, 1).unsqueeze(0)  # [1, NH, T, HD]
            if T == 1:
                o = F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=True)
            elif start == 0:
                o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True)
            else:
                o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, enable_gqa=True)
            h = h + F.linear(o[0].transpose(0, 1).reshape(T, q_w), lw["o"])
            x = self.rms(h, lw["post_norm"])
            g, u = F.linear(x, lw["gate_up"]).chunk(2, -1)
            h = h + F.linear(F.silu(g) * u, lw["down"])
        x = self.rms(h[-1:], self.final_norm)
        return torch.argmax(F.linear(x, self.lm_head), -1)


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


def bench_prefill(m, tokens, chunk, reps):
    dev = m.dev
    ids = (torch.arange(tokens, device=dev, dtype=torch.long) * 7919 + 13) % m.V
    allpos = torch.arange(tokens, device=dev, dtype=torch.long)

    def once():
        out = None
        for s in range(0, tokens, chunk):
            e = min(tokens, s + chunk)
            out = m.forward(ids[s:e], allpos[s:e], s, e)
        return int(out.item())

    once()  # warm-up
    ms = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        once()
        ms.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(ms)
    return dict(tokens=tokens, chunk=chunk, ms=med, tokens_per_s=tokens / (med * 1e-3))


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
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_peer: torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    with open(a.config) as f:
        cfg = json.load(f)
    dev = torch.device("cuda", a.gpu)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    max_len = max(max(a.contexts), max(a.prefill))
    m = Qwen3Peer(cfg, max_len, dev)
    report = dict(device=torch.cuda.get_device_name(dev), torch=torch.__version__, decode=[], prefill=[])
    with torch.inference_mode():
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
