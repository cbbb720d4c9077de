#!/usr/bin/env python3
"""The model zoo served: torchvision's classification families, a segmentation model and transformer
encoders and decoders with masks, exported by Debian's PyTorch with torch.onnx.export (opset 17, a
dynamic batch axis; the encoder's sequence axis dynamic too), imported with `ember model import`,
served by one `ember serve`, and asked over HTTP (KServe v2 binary tensors; JSON for one model) and
gRPC (raw contents). Each answer is compared with PyTorch's on the same input:
max|ember - torch| / max|torch| <= 1e-4 in float32. Two models are also converted to float16 and
bfloat16 (`ember model convert`) and served beside, within the tolerance their widths allow
(HALF_TOLERANCE). Weights are torchvision's random initialisation under torch.manual_seed(0)
(weights=None; no download).

  zoo_served_test.py --ember PATH [--only NAME,...] [--keep DIR]

Prints one line per model (parameters, import seconds, errors over each API) and fails on the first
answer out of tolerance. Exit status: 0 pass, 1 fail, 77 skipped (numpy, torch, torchvision or grpc
not importable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TOLERANCE = 1e-4
# float16 keeps 11 significant bits, bfloat16 8: each weight is rounded by up to 2^-11 or 2^-8 of
# itself, and a network adds a few dozen such roundings up (measured 2026-11-28: at most 4e-4 and
# 3.3e-3 on resnet18 and the encoder).
HALF_TOLERANCE = {"fp16": 2e-3, "bf16": 2e-2}
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

try:
    import numpy as np
    import torch
    import torchvision
    import grpc  # noqa: F401 (a SKIP without it; kserve_client uses it)
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy, torch, torchvision and grpc importable by {sys.executable}: {e}")
    sys.exit(SKIP)

from procs import Failure  # noqa: E402
from kserve_client import grpc_infer, http_binary, http_json, serving  # noqa: E402

THREADS = int(os.environ.get("EMBER_REFERENCE_THREADS", "1"))
torch.set_num_threads(THREADS)


class Segmentation(torch.nn.Module):
    """torchvision's segmentation models answer a dict; ONNX needs a tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


class Encoder(torch.nn.Module):
    """A BERT-like encoder over embeddings with a padding mask (1 = token, 0 = padding), both free
    in batch and sequence."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x, attention_mask):
        return self.norm(self.encoder(x, src_key_padding_mask=attention_mask == 0))


class Decoder(torch.nn.Module):
    """A decoder with a causal mask over its target and cross-attention to a memory."""

    def __init__(self, seq):
        super().__init__()
        layer = torch.nn.TransformerDecoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                                 batch_first=True)
        self.decoder = torch.nn.TransformerDecoder(layer, num_layers=2)
        self.register_buffer("causal", torch.nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, tgt, memory):
        return self.decoder(tgt, memory, tgt_mask=self.causal)


def vision(name, size, **kw):
    return lambda: (getattr(torchvision.models, name)(weights=None, **kw), [(3, size, size)])


# name -> (a function making (module, per-input shapes without batch), dynamic axes beyond batch)
FAMILIES = {
    "resnet18": vision("resnet18", 64),
    "mobilenet_v2": vision("mobilenet_v2", 64),
    "mobilenet_v3_small": vision("mobilenet_v3_small", 64),
    "efficientnet_b0": vision("efficientnet_b0", 64),
    "densenet121": vision("densenet121", 64),
    "googlenet": vision("googlenet", 64, aux_logits=False, init_weights=False),  # its own init leaves every feature 0 at 64x64
    "squeezenet1_0": vision("squeezenet1_0", 64),
    "shufflenet_v2_x0_5": vision("shufflenet_v2_x0_5", 64),
    "regnet_x_400mf": vision("regnet_x_400mf", 64),
    "convnext_tiny": vision("convnext_tiny", 64),
    # VGG at 224x224: its adaptive pool to 7x7 exports only from a multiple of 7. ViT at 64x64 to
    # keep the suite short: its position embeddings follow image_size (16 patches instead of 196).
    "vgg11": vision("vgg11", 224),
    "vit_b_16": vision("vit_b_16", 64, image_size=64),
    "lraspp_mobilenet_v3": lambda: (Segmentation(torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None)), [(3, 96, 96)]),
    "transformer_encoder": lambda: (Encoder(), [(10, 64), (10,)]),
    "transformer_decoder": lambda: (Decoder(8), [(8, 64), (12, 64)]),
}
SEQUENCE_AXES = {"transformer_encoder": {0: 1, 1: 1}}  # input index -> its free sequence dim
HALF = ("resnet18", "transformer_encoder")


def make(name):
    torch.manual_seed(0)
    module, shapes = FAMILIES[name]()
    # torchvision initialises some heads to zeros (ViT): an all-zero answer would match anything.
    for m in module.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.detach().any():
            torch.nn.init.normal_(m.weight, std=0.02)
    return module.eval(), shapes


def example_inputs(name, shapes, batch, seed, seq=None):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, s in enumerate(shapes):
        s = list(s)
        if seq is not None and i in SEQUENCE_AXES.get(name, {}):
            s[SEQUENCE_AXES[name][i] - 1] = seq
        if name == "transformer_encoder" and i == 1:
            mask = torch.ones([batch] + s, dtype=torch.int64)
            mask[0, s[0] // 2:] = 0  # the first sequence is half padding
            out.append(mask)
        else:
            out.append(torch.randn([batch] + s, generator=g))
    return out


def export(name, path):
    module, shapes = make(name)
    inputs = example_inputs(name, shapes, 2, 1)
    names = [f"input{i}" for i in range(len(inputs))]
    if name == "transformer_encoder":
        names = ["x", "attention_mask"]
    axes = {n: {0: "batch"} for n in names}
    for i, d in SEQUENCE_AXES.get(name, {}).items():
        axes[names[i]][d] = "sequence"
    axes["output"] = {0: "batch"}
    if name in SEQUENCE_AXES:
        axes["output"][1] = "sequence"
    # Not under no_grad: PyTorch's transformer layers take a fused fast path then, which ONNX cannot
    # express; with gradients enabled they run (and export) their plain ops.
    torch.onnx.export(module, tuple(inputs), path, opset_version=17, input_names=names, output_names=["output"],
                      dynamic_axes=axes, do_constant_folding=True)
    return module, shapes, names


def rel_err(got, want):
    if not np.any(want):
        raise Failure("PyTorch answers all zeros: the comparison could not fail")
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-12))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="")
    args = ap.parse_args()
    names = [n for n in FAMILIES if not args.only or n in args.only.split(",")]
    work = args.keep or tempfile.mkdtemp(prefix="ember-zoo-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo, exist_ok=True)
    modules = {}
    for name in names:
        onnx_path = os.path.join(work, f"{name}.onnx")
        t0 = time.time()
        modules[name] = export(name, onnx_path)
        exported = time.time() - t0
        t0 = time.time()
        r = subprocess.run([args.ember, "model", "import", onnx_path, "--out", os.path.join(repo, name, "1"),
                            "--name", name], capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"{name}: import failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        params = sum(p.numel() for p in modules[name][0].parameters())
        print(f"{name}: {params / 1e6:.1f} M parameters, exported in {exported:.1f} s, imported in "
              f"{time.time() - t0:.2f} s", flush=True)
        if name in HALF:
            for width in HALF_TOLERANCE:
                c = subprocess.run([args.ember, "model", "convert", os.path.join(repo, name, "1"), "--dtype", width,
                                    "--out", os.path.join(repo, f"{name}_{width}", "1")], capture_output=True, text=True)
                if c.returncode != 0:
                    raise Failure(f"{name}: convert to {width} failed:\n{c.stdout}{c.stderr}")
    try:
        with serving(args.ember, repo, work, "3GiB", THREADS) as (hport, stub, pb):
            for name in names:
                module, shapes, input_names = modules[name]
                for batch, seq, seed in ((1, None, 2), (3, None, 3)) + (((2, 6, 4),) if name in SEQUENCE_AXES else ()):
                    inputs = example_inputs(name, shapes, batch, seed, seq)
                    with torch.no_grad():
                        want = module(*inputs).numpy()
                    arrays = [i.numpy() for i in inputs]
                    errors = {"http": rel_err(http_binary(hport, name, arrays, input_names), want),
                              "grpc": rel_err(grpc_infer(stub, pb, name, arrays, input_names), want)}
                    if name == "resnet18":
                        errors["json"] = rel_err(http_json(hport, name, arrays, input_names), want)
                    shape = f"batch {batch}" + (f", sequence {seq}" if seq else "")
                    print(f"  {name} {shape}: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()), flush=True)
                    bad = {k: v for k, v in errors.items() if not v <= TOLERANCE}
                    if bad:
                        raise Failure(f"{name} {shape}: relative max error {bad} above {TOLERANCE}")
                    if name in HALF:
                        for width, tol in HALF_TOLERANCE.items():
                            e = rel_err(grpc_infer(stub, pb, f"{name}_{width}", arrays, input_names), want)
                            print(f"  {name}_{width} {shape}: grpc {e:.1e} (tolerance {tol})", flush=True)
                            if not e <= tol:
                                raise Failure(f"{name}_{width} {shape}: relative max error {e:.2e} above {tol}")
        print("PASS")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
