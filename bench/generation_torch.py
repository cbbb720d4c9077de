#!/usr/bin/env python3
"""PyTorch's decode of a Hugging Face folder's model with its KV cache: the baseline of generation_bench.

  generation_torch.py DIR [--prompt-len 16] [--tokens 64] [--threads 2] [--rounds 3]
  generation_torch.py --serve        (generation_bench --torch: one JSON request per stdin line)

The model is tools/llm_reference.py's (GPT-2 or Llama-style, written with torch alone, as
transformers computes it; fp32): the prompt in one forward pass that fills the cache, then one token
per pass, greedy. Decode tokens/s counts the tokens after the first (the first comes from the
prefill pass) over the passes after the prefill, as generation_bench counts Ember's; prefill tokens/s
is the prompt over the first pass. torch.set_num_threads is --threads (the bench's). CPU only: the
reference builds its tensors on the CPU.

Standalone it prints one line per measurement and the medians. In --serve mode requests are
  {"op": "load", "dir", "threads", "device"}  -> {"ok", "torch", "threads", "family"}
  {"op": "decode", "prompt": [ids], "tokens"}  -> {"ok", "prefill_tokens_per_s", "decode_tokens_per_s", "tokens"}
and errors come back as {"ok": false, "error"}.

Requirements: numpy, torch (1.13 is enough). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import llm_reference  # noqa: E402  (the reference model, shared with the conformance tests)


def decode(model, layers: int, prompt: list, tokens: int) -> dict:
    if not prompt or tokens < 1:
        raise llm_reference.ReferenceError(f"decode: a prompt of {len(prompt)} tokens, {tokens} to generate (needs >= 1 each)")
    cache = llm_reference.Cache(layers, None)
    out = []
    ids, start = prompt, 0
    with torch.no_grad():
        t0 = time.perf_counter()
        prefill_s = 0.0
        for step in range(tokens):
            positions = torch.arange(start, start + len(ids), dtype=torch.int64)
            logits = model.forward(torch.tensor(ids, dtype=torch.int64), positions, cache)
            token = int(torch.argmax(logits))
            out.append(token)
            if step == 0:
                prefill_s = time.perf_counter() - t0
                t1 = time.perf_counter()
            start += len(ids)
            ids = [token]
        decode_s = time.perf_counter() - t1
    return {
        "prefill_tokens_per_s": len(prompt) / prefill_s,
        "decode_tokens_per_s": (tokens - 1) / decode_s if tokens > 1 else 0.0,
        "tokens": out,
    }


def load(folder: str, threads: int, device: str):
    if device != "sim" and device != "cpu":
        raise llm_reference.ReferenceError(f"device {device!r}: the PyTorch baseline runs on the CPU only")
    torch.set_num_threads(max(1, threads))
    family, model = llm_reference.build(folder, None)
    return family, model


def serve() -> int:
    model, family = None, ""
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req["op"] == "load":
                family, model = load(req["dir"], int(req.get("threads", 1)), req.get("device", "cpu"))
                reply = {"ok": True, "torch": torch.__version__, "threads": torch.get_num_threads(), "family": family}
            elif req["op"] == "decode":
                if model is None:
                    raise llm_reference.ReferenceError("decode before load")
                reply = {"ok": True, **decode(model, model.layers, [int(x) for x in req["prompt"]], int(req["tokens"]))}
            else:
                raise llm_reference.ReferenceError(f"unknown op {req['op']!r}")
        except (llm_reference.ReferenceError, KeyError, ValueError, OSError) as e:
            reply = {"ok": False, "error": str(e)}
        print(json.dumps(reply), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.serve:
        return serve()
    if not a.folder:
        ap.error("DIR is required (or --serve)")
    if a.prompt_len < 1 or a.tokens < 2:
        ap.error("--prompt-len must be >= 1 and --tokens >= 2")
    try:
        family, model = load(a.folder, a.threads, "cpu")
        vocab = model.head.shape[0]
        prompt = [(i * 7919 + 13) % vocab for i in range(a.prompt_len)]  # generation_bench's prompt
        decode(model, model.layers, prompt, 4)  # warm-up
        rates = []
        for r in range(a.rounds):
            d = decode(model, model.layers, prompt, a.tokens)
            rates.append(d["decode_tokens_per_s"])
            print(f"round {r}: prefill {d['prefill_tokens_per_s']:.1f} tokens/s, decode {d['decode_tokens_per_s']:.1f} tokens/s")
    except llm_reference.ReferenceError as e:
        print(f"generation_torch: {e}", file=sys.stderr)
        return 2
    print(f"pytorch {torch.__version__} ({family}, {torch.get_num_threads()} threads): decode 1 stream "
          f"{statistics.median(rates):.1f} tokens/s (median of {a.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
