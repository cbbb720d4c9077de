#!/usr/bin/env python3
"""kv_attention's PyTorch cross-check: what Hugging Face's Llama attention computes for the tokens
kernels_cpu_kv_attention_test.cpp (KvAttentionTorch) ran through Ember.

  kv_attention_torch.py DIR

DIR holds spec.json ({"heads", "kv_heads", "head_dim", "rope_dim", "sequences": [[qkv row of each
position], ...]}), qkv.f32 (the rows, float32, row-major [rows, (H + 2 Hkv) D]) and inv_freq.f32
([rope_dim / 2]); this writes expected.f32: per sequence, per position, the attention output
[H * D] of that position over positions 0..p of its sequence, in the order the rows are listed.

The formulas are transformers' (models/llama/modeling_llama.py: rotate_half, apply_rotary_pos_emb,
repeat_kv, causal softmax(q k^T * head_dim^-0.5) v in float32), with partial rotary as GPT-NeoX
applies it (the first rope_dim dims rotate, the rest pass). Exit 0 written, 77 torch missing.
"""

import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy and torch: {e}")
    sys.exit(77)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin, rope_dim):
    rot, keep = x[..., :rope_dim], x[..., rope_dim:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, keep), dim=-1)


def repeat_kv(x, n_rep):
    kv_heads, seq, dim = x.shape
    return x[:, None, :, :].expand(kv_heads, n_rep, seq, dim).reshape(kv_heads * n_rep, seq, dim)


def main(d):
    with open(os.path.join(d, "spec.json")) as f:
        spec = json.load(f)
    H, Hkv, D, R = spec["heads"], spec["kv_heads"], spec["head_dim"], spec["rope_dim"]
    qkv = torch.from_numpy(np.fromfile(os.path.join(d, "qkv.f32"), dtype=np.float32).reshape(-1, (H + 2 * Hkv) * D))
    inv_freq = torch.from_numpy(np.fromfile(os.path.join(d, "inv_freq.f32"), dtype=np.float32))
    out = []
    for rows in spec["sequences"]:
        x = qkv[rows]  # [S, (H + 2 Hkv) D], positions 0..S-1
        S = x.shape[0]
        q = x[:, : H * D].reshape(S, H, D).transpose(0, 1)
        k = x[:, H * D : (H + Hkv) * D].reshape(S, Hkv, D).transpose(0, 1)
        v = x[:, (H + Hkv) * D :].reshape(S, Hkv, D).transpose(0, 1)
        if R > 0:
            freqs = torch.arange(S, dtype=torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            q, k = apply_rotary(q, emb.cos(), emb.sin(), R), apply_rotary(k, emb.cos(), emb.sin(), R)
        k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
        scores = torch.matmul(q, k.transpose(1, 2)) * D**-0.5
        mask = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
        y = torch.matmul(torch.softmax(scores + mask, dim=-1), v)  # [H, S, D]
        out.append(y.transpose(0, 1).reshape(S, H * D))
    torch.cat(out).numpy().astype(np.float32).tofile(os.path.join(d, "expected.f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
