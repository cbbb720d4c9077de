#!/usr/bin/env python3
"""The PyTorch reference for Ember's text generation: a Hugging Face folder's model run token by token
with a KV cache, the way transformers runs GPT2LMHeadModel and LlamaForCausalLM (also model_type
mistral and qwen2), written here with torch alone (no transformers).

  llm_reference.py DIR --prompt 1,2,3 [--steps 64] [--greedy | --temperature T --top-k K --top-p P --seed S]
                   [--weights-dtype fp16|bf16] [--cache-dtype fp16|bf16] [--logits] [--logits-npy FILE]
                   [--force 4,5,6]

The prompt runs in one step (its cache filled), then one token per step, each step's logits of the
last position (float32, [vocab]) choosing the next token: argmax (ties to the lowest id, as
torch.argmax) or, seeded, a draw from the softmax of logits / T after top-k and top-p (torch.multinomial
with a torch.Generator seeded by --seed; transformers' warper order: temperature, top-k, top-p).
--force feeds the given tokens instead of the chosen ones (teacher forcing: two implementations
compared step by step on one sequence). Prints one JSON object:
  {"family", "prompt", "tokens" (the chosen ids), "margins" (per step, top-1 minus top-2 logit),
   "max_abs_logit" (per step), "inv_freq" (llama: the rotary table), "logits" (with --logits)}
and with --logits-npy writes the logits as a float32 .npy [steps, vocab].

What it computes, as transformers does:
  gpt2   wte[ids] + wpe[positions]; per block x += c_proj(attn(ln_1(x))), x += mlp(ln_2(x)) with
         Conv1D weights [in, out] (x @ W + b), gelu_new (the tanh approximation), scores / sqrt(D)
         (scale_attn_weights; also / (layer + 1) with scale_attn_by_inverse_layer_idx), causal
         softmax in float32; ln_f; the head tied to wte.
  llama  embed_tokens[ids]; per block x += o_proj(attn(rms(x))), x += down(silu(gate(h)) * up(h)) with
         h = rms(x); RMSNorm as LlamaRMSNorm (float32 variance, weight * normed); q, k rotated with
         cos/sin of positions * inv_freq over the whole head (rotate_half pairing); grouped-query
         heads (repeat_kv); scores / sqrt(D); the head lm_head (or embed_tokens when tied).
  inv_freq as modeling_rope_utils computes it: default, linear (inv_freq / factor) and llama3
  (Llama 3.1's smoothed wavelengths), all float32; dynamic NTK is refused (Ember refuses it).
--weights-dtype rounds every weight to that width and computes in float32 (what Ember's kernels do
with half-precision weights); --cache-dtype rounds k and v as they enter the cache (Ember's KV blocks
of that type). The safetensors files are read with the small parser below.

Requirements: numpy, torch (1.13 is enough). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

ST_DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2)}
WIDTHS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class ReferenceError(Exception):
    pass


def read_safetensors(path: str) -> dict:
    """name -> float32 tensor (F32, F16, BF16). The format: u64 header length, JSON header, data."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ReferenceError(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ReferenceError(f"{path}: header length {n} past the end")
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ST_DTYPES:
            raise ReferenceError(f"{path}: tensor {name}: dtype {info['dtype']}")
        dtype, size = ST_DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if end - begin != count * size or end > len(data):
            raise ReferenceError(f"{path}: tensor {name}: data_offsets {begin}, {end} do not fit")
        raw = np.frombuffer(data, dtype=np.uint8, count=end - begin, offset=begin).copy()
        if dtype == torch.bfloat16:
            t = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
        elif dtype == torch.float16:
            t = torch.from_numpy(raw.view(np.float16))
        else:
            t = torch.from_numpy(raw.view(np.float32))
        out[name] = t.reshape(info["shape"]).float()
    return out


def read_folder(folder: str) -> tuple:
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    weights = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for name in files:
            weights.update(read_safetensors(os.path.join(folder, name)))
    else:
        weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    return config, weights


def rope_inv_freq(config: dict, head_dim: int) -> torch.Tensor:
    """modeling_rope_utils' inverse frequencies (float32), for the rope types Ember imports."""
    base = float(config.get("rope_theta", 10000.0))
    dim = head_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    rs = config.get("rope_scaling")
    if not rs:
        return inv_freq
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / rs["factor"]
    if kind == "llama3":
        factor = rs["factor"]
        low_freq_factor = rs["low_freq_factor"]
        high_freq_factor = rs["high_freq_factor"]
        old_context_len = rs["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium, smoothed, inv_freq_llama)
    raise ReferenceError(f"rope_scaling type {kind!r} is not one the reference (or Ember) implements")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Cache:
    """Per layer, k and v [heads_kv, positions, D] so far, rounded to the cache width when given."""

    def __init__(self, layers: int, width):
        self.k = [None] * layers
        self.v = [None] * layers
        self.width = width

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple:
        if self.width is not None:
            k = k.to(self.width).float()
            v = v.to(self.width).float()
        self.k[layer] = k if self.k[layer] is None else torch.cat((self.k[layer], k), dim=1)
        self.v[layer] = v if self.v[layer] is None else torch.cat((self.v[layer], v), dim=1)
        return self.k[layer], self.v[layer]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, scale: float) -> torch.Tensor:
    """q [H, T, D] at `positions`, k/v [Hkv, P, D] (every position so far): causal, GQA by repetition."""
    groups = q.shape[0] // k.shape[0]
    k = k.repeat_interleave(groups, dim=0)
    v = v.repeat_interleave(groups, dim=0)
    scores = torch.matmul(q, k.transpose(1, 2)) * scale
    keys = torch.arange(k.shape[1])
    mask = keys[None, :] > positions[:, None]
    scores = scores.masked_fill(mask[None], float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1)
    return torch.matmul(probs, v)


class Gpt2:
    def __init__(self, config: dict, w: dict):
        prefix = "transformer." if "transformer.wte.weight" in w else ""
        self.w = {k[len(prefix):] if k.startswith(prefix) else k: t for k, t in w.items()}
        self.e = config["n_embd"]
        self.layers = config["n_layer"]
        self.heads = config["n_head"]
        self.d = self.e // self.heads
        self.eps = config.get("layer_norm_epsilon", 1e-5)
        self.scale_weights = config.get("scale_attn_weights", True)
        self.by_layer = config.get("scale_attn_by_inverse_layer_idx", False)
        if config.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ReferenceError("gpt2: activation_function " + str(config.get("activation_function")))
        self.head = self.w.get("lm_head.weight", self.w["wte.weight"])
        self.inv_freq = None

    def ln(self, x, name):
        return torch.nn.functional.layer_norm(x, (self.e,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def forward(self, ids, positions, cache: Cache) -> torch.Tensor:
        x = self.w["wte.weight"][ids] + self.w["wpe.weight"][positions]
        t = ids.shape[0]
        for i in range(self.layers):
            p = f"h.{i}."
            h = self.ln(x, p + "ln_1")
            qkv = h @ self.w[p + "attn.c_attn.weight"] + self.w[p + "attn.c_attn.bias"]
            q, k, v = qkv.split(self.e, dim=-1)
            q = q.view(t, self.heads, self.d).transpose(0, 1)
            k = k.view(t, self.heads, self.d).transpose(0, 1)
            v = v.view(t, self.heads, self.d).transpose(0, 1)
            k, v = cache.append(i, k, v)
            scale = (1.0 / math.sqrt(self.d)) if self.scale_weights else 1.0
            if self.by_layer:
                scale /= float(i + 1)
            a = attend(q, k, v, positions, scale).transpose(0, 1).reshape(t, self.e)
            x = x + (a @ self.w[p + "attn.c_proj.weight"] + self.w[p + "attn.c_proj.bias"])
            h = self.ln(x, p + "ln_2")
            m = torch.nn.functional.gelu(h @ self.w[p + "mlp.c_fc.weight"] + self.w[p + "mlp.c_fc.bias"],
                                         approximate="tanh")
            x = x + (m @ self.w[p + "mlp.c_proj.weight"] + self.w[p + "mlp.c_proj.bias"])
        x = self.ln(x[-1:], "ln_f")
        return (x @ self.head.t())[0]


class Llama:
    def __init__(self, config: dict, w: dict):
        self.w = w
        self.config = config
        self.e = config["hidden_size"]
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads") or self.heads
        self.d = config.get("head_dim") or self.e // self.heads
        self.eps = config.get("rms_norm_eps", 1e-6)
        if config.get("hidden_act", "silu") != "silu":
            raise ReferenceError("llama: hidden_act " + str(config.get("hidden_act")))
        self.inv_freq = rope_inv_freq(config, self.d)
        self.head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]

    def rms(self, x, name):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.w[name] * (x * torch.rsqrt(variance + self.eps))

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].t()
        b = self.w.get(name + ".bias")
        return y if b is None else y + b

    def forward(self, ids, positions, cache: Cache) -> torch.Tensor:
        x = self.w["model.embed_tokens.weight"][ids]
        t = ids.shape[0]
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        for i in range(self.layers):
            p = f"model.layers.{i}."
            h = self.rms(x, p + "input_layernorm.weight")
            q = self.linear(h, p + "self_attn.q_proj").view(t, self.heads, self.d).transpose(0, 1)
            k = self.linear(h, p + "self_attn.k_proj").view(t, self.kv_heads, self.d).transpose(0, 1)
            v = self.linear(h, p + "self_attn.v_proj").view(t, self.kv_heads, self.d).transpose(0, 1)
            q = q * cos[None] + rotate_half(q) * sin[None]
            k = k * cos[None] + rotate_half(k) * sin[None]
            k, v = cache.append(i, k, v)
            a = attend(q, k, v, positions, 1.0 / math.sqrt(self.d)).transpose(0, 1).reshape(t, self.heads * self.d)
            x = x + self.linear(a, p + "self_attn.o_proj")
            h = self.rms(x, p + "post_attention_layernorm.weight")
            gate = self.linear(h, p + "mlp.gate_proj")
            x = x + self.linear(torch.nn.functional.silu(gate) * self.linear(h, p + "mlp.up_proj"), p + "mlp.down_proj")
        x = self.rms(x[-1:], "model.norm.weight")
        return (x @ self.head.t())[0]


def build(folder: str, weights_dtype):
    config, w = read_folder(folder)
    if weights_dtype is not None:
        w = {k: t.to(weights_dtype).float() for k, t in w.items()}
    kind = config.get("model_type")
    if kind == "gpt2":
        return "gpt2", Gpt2(config, w)
    if kind in ("llama", "mistral", "qwen2"):
        return "llama", Llama(config, w)
    raise ReferenceError(f"model_type {kind!r}: the reference runs gpt2, llama, mistral and qwen2")


def choose(logits: torch.Tensor, a, gen) -> int:
    if a.temperature <= 0:
        return int(torch.argmax(logits))
    x = logits / a.temperature
    if a.top_k > 0:
        kth = torch.topk(x, min(a.top_k, x.shape[0])).values[-1]
        x = x.masked_fill(x < kth, float("-inf"))
    if a.top_p < 1.0:
        sorted_x, order = torch.sort(x, descending=False)
        cum = sorted_x.softmax(-1).cumsum(-1)
        remove = cum <= (1 - a.top_p)
        remove[-1] = False
        x = x.masked_fill(remove.scatter(0, order, remove), float("-inf"))
    return int(torch.multinomial(torch.softmax(x, -1), 1, generator=gen))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--prompt", required=True, help="token ids, comma-separated")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--greedy", action="store_true", help="the default: argmax at every step")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights-dtype", choices=("fp32", "fp16", "bf16"), default="fp32")
    ap.add_argument("--cache-dtype", choices=("fp32", "fp16", "bf16"), default="fp32")
    ap.add_argument("--force", default="", help="token ids fed instead of the chosen ones")
    ap.add_argument("--logits", action="store_true", help="every step's logits in the JSON")
    ap.add_argument("--logits-npy", default="", help="every step's logits as a float32 .npy [steps, vocab]")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("EMBER_REFERENCE_THREADS", "1")))
    a = ap.parse_args()
    if a.greedy:
        a.temperature = 0.0
    torch.set_num_threads(max(1, a.threads))
    try:
        family, model = build(a.folder, None if a.weights_dtype == "fp32" else WIDTHS[a.weights_dtype])
        prompt = [int(x) for x in a.prompt.split(",") if x.strip()]
        forced = [int(x) for x in a.force.split(",") if x.strip()]
        if not prompt:
            raise ReferenceError("--prompt: no token ids")
        if forced and len(forced) < a.steps - 1:
            raise ReferenceError(f"--force: {len(forced)} tokens for {a.steps} steps (needs steps - 1)")
        cache = Cache(model.layers, None if a.cache_dtype == "fp32" else WIDTHS[a.cache_dtype])
        gen = torch.Generator().manual_seed(a.seed)
        tokens, margins, peaks, all_logits = [], [], [], []
        ids, start = prompt, 0
        with torch.no_grad():
            for step in range(a.steps):
                positions = torch.arange(start, start + len(ids), dtype=torch.int64)
                logits = model.forward(torch.tensor(ids, dtype=torch.int64), positions, cache).float()
                top2 = torch.topk(logits, 2).values
                margins.append(float(top2[0] - top2[1]))
                peaks.append(float(logits.abs().max()))
                all_logits.append(logits.numpy().copy())
                token = choose(logits, a, gen)
                tokens.append(token)
                start += len(ids)
                ids = [forced[step] if forced and step < len(forced) else token]
    except ReferenceError as e:
        print(f"llm_reference: {e}", file=sys.stderr)
        return 2
    out = {"family": family, "prompt": prompt, "tokens": tokens, "margins": margins, "max_abs_logit": peaks}
    if model.inv_freq is not None:
        out["inv_freq"] = [float(x) for x in model.inv_freq]
    if a.logits:
        out["logits"] = [[float(x) for x in row] for row in all_logits]
    if a.logits_npy:
        np.save(a.logits_npy, np.stack(all_logits).astype(np.float32))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
