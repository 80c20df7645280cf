#!/usr/bin/env python3
"""Writes a random Qwen3 checkpoint the way users get them: through transformers' own
Qwen3ForCausalLM(config).save_pretrained (config.json as the installed transformers writes it,
sharded safetensors), for the HF gate (run_gate.sh). Unlike `kern synth`, every RMSNorm weight
is random around 1 (N(1, 0.1)), so a norm weight read wrongly or skipped shows in the logits.

  make_hf_checkpoint.py --kind bf16|fp32|fp16|yarn --out DIR [--tokenizer-dir DIR] [--seed N]

bf16: untied, head_dim 128, 4 layers, sharded at 20 MB (the file set a fine-tune leaves).
fp32 / fp16: tied, head_dim 64, the weights saved in that dtype (kern converts to bf16 on load).
yarn: head_dim 128 with rope_parameters {rope_type: yarn, factor 4, original_max_position_embeddings
512}: prompts of the gate (up to 512 tokens + 32 steps) reach past the original window.
"""
import argparse
import json
import os
import shutil

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

KINDS = {
    "bf16": dict(hidden_size=512, intermediate_size=1536, num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                 tie_word_embeddings=False, dtype=torch.bfloat16),
    "fp32": dict(hidden_size=256, intermediate_size=768, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                 tie_word_embeddings=True, dtype=torch.float32),
    "fp16": dict(hidden_size=256, intermediate_size=768, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                 tie_word_embeddings=True, dtype=torch.float16),
    "yarn": dict(hidden_size=512, intermediate_size=1536, num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                 tie_word_embeddings=True, dtype=torch.bfloat16),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-dir", help="copy tokenizer.json / tokenizer_config.json from here")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    k = dict(KINDS[args.kind])
    dtype = k.pop("dtype")
    extra = {}
    if args.kind == "yarn":
        extra["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                    "original_max_position_embeddings": 512}
    config = Qwen3Config(vocab_size=151936, num_hidden_layers=args.layers, max_position_embeddings=40960,
                         rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645, **k, **extra)
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.1)
            else:
                # Larger than the 0.02 init so the logits are not flat and argmax margins exist.
                p.normal_(0.0, 0.05)
    model = model.to(dtype)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    model.save_pretrained(args.out, max_shard_size="20MB", safe_serialization=True)
    if args.tokenizer_dir:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(args.tokenizer_dir, f)
            if os.path.exists(src):
                shutil.copy(src, args.out)
    cfg = json.load(open(os.path.join(args.out, "config.json")))
    shards = sorted(f for f in os.listdir(args.out) if f.endswith(".safetensors"))
    print(f"{args.kind}: {len(shards)} shards, dtype {cfg.get('dtype', cfg.get('torch_dtype'))}, "
          f"rope {cfg.get('rope_parameters', cfg.get('rope_scaling'))}")


if __name__ == "__main__":
    main()
