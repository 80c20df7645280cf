#!/usr/bin/env python3
"""Reference ids for kern's tokenizer tests, produced by the HF `tokenizers` package.

Usage (on a machine with `tokenizers`, optionally `transformers`):
  python3 scripts/tokenizer/make_reference.py --tokenizer DIR/tokenizer.json \
      --strings strings.json -o reference.json

`strings.json` comes from scripts/tokenizer/make_strings.py. The output holds, for every
string, the ids `tokenizers` gives (cases), plus deterministic id sequences with the text
`tokenizers` decodes them to (decodes: random ids, lone UTF-8 continuation bytes, slices of
encodings cut inside characters, added tokens) so the byte-level decoder's lossy UTF-8
handling can be checked too. If `transformers` is importable and tokenizer_config.json sits
next to tokenizer.json, AutoTokenizer's ids are compared with the `tokenizers` ones and the
agreement is recorded.
"""
import argparse
import json
import os
import platform
import random
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--strings", required=True)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--seed", type=int, default=4242)
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    print("python", sys.version.split()[0], "tokenizers", tokenizers.__version__, flush=True)
    tok = Tokenizer.from_file(args.tokenizer)
    with open(args.strings, encoding="utf-8") as f:
        strings = json.load(f)

    enc = tok.encode_batch(strings, add_special_tokens=True)
    ids = [e.ids for e in enc]
    enc_plain = tok.encode_batch(strings, add_special_tokens=False)
    same_without_specials = all(a.ids == b.ids for a, b in zip(enc, enc_plain))
    print(f"encoded {len(strings)} strings, {sum(map(len, ids))} ids; add_special_tokens irrelevant: {same_without_specials}", flush=True)

    meta = {
        "generator": "scripts/tokenizer/make_reference.py",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "tokenizers_version": tokenizers.__version__,
        "encode_call": "Tokenizer.from_file(tokenizer.json).encode_batch(strings, add_special_tokens=True)",
        "add_special_tokens_irrelevant": same_without_specials,
        "vocab_size_with_added": tok.get_vocab_size(with_added_tokens=True),
    }

    # Cross-check with transformers (what the model card's users call).
    try:
        import transformers
        from transformers import AutoTokenizer
        meta["transformers_version"] = transformers.__version__
        tdir = os.path.dirname(os.path.abspath(args.tokenizer))
        if os.path.exists(os.path.join(tdir, "tokenizer_config.json")):
            at = AutoTokenizer.from_pretrained(tdir)
            tids = at(strings, add_special_tokens=True)["input_ids"]
            bad = [i for i, (a, b) in enumerate(zip(ids, tids)) if list(a) != list(b)]
            meta["transformers_class"] = type(at).__name__
            meta["transformers_mismatches"] = bad[:50]
            meta["transformers_agrees"] = not bad
            print(f"transformers {transformers.__version__} {type(at).__name__}: {len(bad)} mismatching strings", flush=True)
    except Exception as e:  # recorded, not fatal: the tokenizers ids are the reference
        meta["transformers_error"] = repr(e)[:500]
        print("transformers check failed:", repr(e)[:500], flush=True)

    # Decoding references.
    r = random.Random(args.seed)
    vocab_n = tok.get_vocab_size(with_added_tokens=False)
    total_n = tok.get_vocab_size(with_added_tokens=True)
    b2u = bytes_to_unicode()
    byte_id = {b: tok.token_to_id(c) for b, c in b2u.items()}
    seqs = []
    for _ in range(200):  # random model tokens
        seqs.append([r.randrange(vocab_n) for _ in range(r.randint(1, 16))])
    for _ in range(150):  # raw bytes: lone continuation bytes, truncated and overlong sequences
        seqs.append([byte_id[r.choice([r.randrange(0x80, 0x100), r.randrange(0x20, 0x80), 0xE4, 0xF0, 0x9F, 0xC0, 0xED, 0xA0])]
                     for _ in range(r.randint(1, 10))])
    for _ in range(150):  # slices of real encodings, often cutting a character apart
        src = ids[r.randrange(len(ids))]
        if not src:
            continue
        a = r.randrange(len(src))
        b = r.randint(a + 1, min(len(src), a + 12))
        seqs.append(src[a:b])
    for _ in range(100):  # added tokens among model tokens
        seqs.append([r.randrange(vocab_n, total_n) if r.random() < 0.4 else r.randrange(vocab_n) for _ in range(r.randint(1, 8))])
    decodes = []
    for s in seqs:
        decodes.append({"ids": s,
                        "text": tok.decode(s, skip_special_tokens=False),
                        "text_skip_special": tok.decode(s, skip_special_tokens=True)})
    print(f"{len(decodes)} decode references", flush=True)

    with open(args.out, "w", encoding="utf-8") as f:
        f.write("{\n\"meta\": " + json.dumps(meta, ensure_ascii=False, sort_keys=True) + ",\n\"cases\": [\n")
        f.write(",\n".join(json.dumps({"text": s, "ids": i}, ensure_ascii=False, separators=(",", ":")) for s, i in zip(strings, ids)))
        f.write("\n],\n\"decodes\": [\n")
        f.write(",\n".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in decodes))
        f.write("\n]\n}\n")
    print("wrote", args.out, os.path.getsize(args.out), "bytes", flush=True)


if __name__ == "__main__":
    main()
