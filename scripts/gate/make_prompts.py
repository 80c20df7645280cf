#!/usr/bin/env python3
"""Gate prompts: windows of natural text (corpus.txt, tokenized by kern's Qwen3 tokenizer) of
fixed lengths from 1 to 512 tokens, each starting at a different paragraph.

usage: make_prompts.py --kern BIN --tokenizer tokenizer.json --corpus corpus.txt -o prompts.json
"""
import argparse
import json
import subprocess

LENGTHS = [1, 2, 5, 9, 17, 33, 48, 64, 97, 128, 160, 200, 255, 256, 300, 384, 450, 511, 512]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kern", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    with open(a.corpus, encoding="utf-8") as f:
        paragraphs = [line for line in f.read().split("\n") if line.strip()]
    texts = [p + "\n" for p in paragraphs]
    res = subprocess.run([a.kern, "tokenize", "--tokenizer", a.tokenizer, "--json"], input=json.dumps(texts),
                         capture_output=True, text=True, check=True)
    ids = json.loads(res.stdout)
    stream, starts = [], []
    for p in ids:
        starts.append(len(stream))
        stream.extend(p)
    if len(stream) < max(LENGTHS):
        raise SystemExit(f"corpus is {len(stream)} tokens; need at least {max(LENGTHS)}")
    prompts = []
    for i, n in enumerate(LENGTHS):
        s = starts[i % len(starts)]
        window = [stream[(s + k) % len(stream)] for k in range(n)]
        prompts.append({"name": f"p{i:02d}", "ids": window})
    with open(a.out, "w") as f:
        json.dump(prompts, f)
    print(f"{len(prompts)} prompts of {LENGTHS[0]}..{LENGTHS[-1]} tokens from a corpus of {len(stream)} tokens")


if __name__ == "__main__":
    main()
