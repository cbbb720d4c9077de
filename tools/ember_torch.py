#!/usr/bin/env python3
"""Ember <-> PyTorch: reference modules, weight import and export, and output comparison.

This file is both a module (the reference tests and benchmarks import it) and a command-line tool:

  ember_torch.py import --arch ARCH [--tiny] (--state-dict FILE.pt | --torchvision resnet50) --out DIR
      Writes an Ember model directory (model.json + weights.safetensors) from a PyTorch state dict.
  ember_torch.py compare DIR [--arch ARCH] [--state-dict FILE.pt] [--batch 2] [--seq-len 8] [--seed 0]
      Runs DIR with `ember run` and the PyTorch reference on the same random inputs and prints
      max|ember - torch| / max|torch| per output (exit status 1 when one exceeds --tolerance).

The reference modules are built from PyTorch's own layers (torch.nn, torchvision), not from Ember's
op table, so they are an independent implementation of the four architectures `ember model new`
knows (model/architectures.cpp). Ember's tensor names are the torch state_dict keys, so an import is a
rename-free copy: for every layer of model.json, in layer order, each tensor its "weights" object
names, in that object's order.

Requirements: Python 3, numpy, torch (torchvision for ResNet-50). Nothing is ever downloaded.
The ember binary is found via --ember, $EMBER, or build/bin/ember beside this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import OrderedDict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

try:
    import numpy as np
except ImportError:  # pragma: no cover
    sys.exit(f"error: ember_torch.py needs numpy (and torch) importable by {sys.executable}; "
             "on Debian: apt install python3-torch python3-torchvision, then run with /usr/bin/python3")

try:  # torch is needed for the reference modules, not for the safetensors helpers.
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - reported by require_torch()
    torch = None
    nn = None
    F = None

ARCHITECTURES = ("mlp", "resnet50", "bert-base", "gpt2")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class EmberTorchError(Exception):
    """A problem the user can fix (bad file, missing key, shape mismatch, ...)."""


def require_torch() -> None:
    if torch is None:
        raise EmberTorchError("PyTorch is not importable by " + sys.executable +
                              " (on Debian: apt install python3-torch python3-torchvision; run with /usr/bin/python3)")


# ---------------------------------------------------------------------------------------------
# safetensors, pure Python: 8-byte little-endian header length N, N bytes of JSON header
# {name: {"dtype", "shape", "data_offsets": [begin, end)}}, optional "__metadata__", then the data.

_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
_NP_TO_ST = {np.dtype(v): k for k, v in _ST_DTYPES.items()}


def read_safetensors(path: str) -> "OrderedDict[str, np.ndarray]":
    """Every tensor of a safetensors file as a numpy array (little-endian), in data order."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise EmberTorchError(f"{path}: {len(blob)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise EmberTorchError(f"{path}: header length {n} exceeds the file ({len(blob)} bytes)")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EmberTorchError(f"{path}: header is not JSON: {e}") from None
    data = memoryview(blob)[8 + n:]
    entries = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    out: "OrderedDict[str, np.ndarray]" = OrderedDict()
    for name, info in entries:
        dtype = _ST_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise EmberTorchError(f"{path}: tensor '{name}': unsupported dtype {info.get('dtype')!r}")
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * np.dtype(dtype).itemsize or end > len(data) or begin < 0:
            raise EmberTorchError(f"{path}: tensor '{name}': data_offsets {begin, end} do not match {shape}")
        out[name] = np.frombuffer(data[begin:end], dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
    return out


def _st_dtype(a: np.ndarray) -> str:
    dt = np.dtype(a.dtype).newbyteorder("=")
    if dt not in _NP_TO_ST:
        raise EmberTorchError(f"dtype {a.dtype} has no safetensors equivalent here")
    return _NP_TO_ST[dt]


def write_safetensors(path: str, tensors: Iterable[Tuple[str, np.ndarray]],
                      metadata: Optional[Dict[str, str]] = None) -> int:
    """Writes tensors in the given order, no gaps, header padded with spaces to a multiple of 8 (as
    Ember does). Written to a temporary file renamed into place. Returns the file size."""
    items = [(name, np.ascontiguousarray(a)) for name, a in tensors]
    header: "OrderedDict[str, object]" = OrderedDict()
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, a in items:
        if name in header:
            raise EmberTorchError(f"{path}: tensor '{name}' written twice")
        header[name] = {"dtype": _st_dtype(a), "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a in items:
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C"))
    os.replace(tmp, path)
    return 8 + len(text) + offset


# ---------------------------------------------------------------------------------------------
# Architectures, as model/architectures.cpp defines them.

TRANSFORMERS = {
    # vocab, positions, hidden, layers, heads, ffn, eps
    ("bert-base", True): dict(vocab=100, positions=32, hidden=64, layers=2, heads=4, ffn=128, eps=1e-12),
    ("bert-base", False): dict(vocab=30522, positions=512, hidden=768, layers=12, heads=12, ffn=3072, eps=1e-12),
    ("gpt2", True): dict(vocab=100, positions=32, hidden=64, layers=2, heads=4, ffn=256, eps=1e-5),
    ("gpt2", False): dict(vocab=50257, positions=1024, hidden=768, layers=12, heads=12, ffn=3072, eps=1e-5),
}
MLP_SIZES = {True: (16, 32, 4), False: (784, 1024, 10)}  # in, hidden, classes
RESNET_TINY_IMAGE, RESNET_IMAGE = 32, 224


def gelu_tanh(x):
    """GPT-2's GELU (tanh approximation); a named function so modules pickle."""
    return F.gelu(x, approximate="tanh")


def _define_modules():
    global MLP, BertEncoder, GPT2Decoder

    class MLP(nn.Module):
        """784-1024-1024-10 (tiny: 16-32-32-4) with ReLU between the linears."""

        def __init__(self, tiny: bool = False):
            super().__init__()
            n_in, hidden, classes = MLP_SIZES[tiny]
            self.fc1 = nn.Linear(n_in, hidden)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Linear(hidden, hidden)
            self.relu2 = nn.ReLU()
            self.fc3 = nn.Linear(hidden, classes)

        def forward(self, input):  # noqa: A002 - the Ember input is named "input"
            return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(input)))))

    class BertEmbeddings(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"])
            self.position_embeddings = nn.Embedding(c["positions"], c["hidden"])
            self.token_type_embeddings = nn.Embedding(2, c["hidden"])
            self.LayerNorm = nn.LayerNorm(c["hidden"], eps=c["eps"])

        def forward(self, input_ids, token_type_ids):
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
            x = x + self.token_type_embeddings(token_type_ids)
            return self.LayerNorm(x)

    class BertPooler(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.dense = nn.Linear(hidden, hidden)

        def forward(self, hidden_states):
            return torch.tanh(self.dense(hidden_states[:, 0]))

    class BertEncoder(nn.Module):
        """BERT-base: embeddings, 12 post-norm TransformerEncoderLayers (GELU erf), tanh pooler.
        forward(input_ids, token_type_ids) -> (last_hidden_state, pooled)."""

        def __init__(self, tiny: bool = False):
            super().__init__()
            c = TRANSFORMERS[("bert-base", tiny)]
            self.config = c
            self.embeddings = BertEmbeddings(c)
            layer = nn.TransformerEncoderLayer(c["hidden"], c["heads"], c["ffn"], dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=False, layer_norm_eps=c["eps"])
            self.encoder = nn.TransformerEncoder(layer, c["layers"])
            self.pooler = BertPooler(c["hidden"])

        def forward(self, input_ids, token_type_ids):
            hidden = self.encoder(self.embeddings(input_ids, token_type_ids))
            return hidden, self.pooler(hidden)

    class GPT2Decoder(nn.Module):
        """GPT-2 small: token + position embeddings, 12 pre-norm causal TransformerEncoderLayers
        (GELU tanh), final LayerNorm, LM head without bias tied to wte (unless tie_weights=False).
        forward(input_ids) -> logits."""

        def __init__(self, tiny: bool = False, tie_weights: bool = True):
            super().__init__()
            c = TRANSFORMERS[("gpt2", tiny)]
            self.config = c
            self.wte = nn.Embedding(c["vocab"], c["hidden"])
            self.wpe = nn.Embedding(c["positions"], c["hidden"])
            layer = nn.TransformerEncoderLayer(c["hidden"], c["heads"], c["ffn"], dropout=0.0, activation=gelu_tanh,
                                               batch_first=True, norm_first=True, layer_norm_eps=c["eps"])
            self.encoder = nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.ln_f = nn.LayerNorm(c["hidden"], eps=c["eps"])
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            if tie_weights:
                self.lm_head.weight = self.wte.weight

        def untie(self) -> None:
            """Gives lm_head its own parameter (a copy of the tied one)."""
            if self.lm_head.weight is self.wte.weight:
                self.lm_head.weight = nn.Parameter(self.wte.weight.detach().clone())

        def forward(self, input_ids):
            seq = input_ids.shape[1]
            positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
            x = self.wte(input_ids) + self.wpe(positions)
            causal = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=input_ids.device), diagonal=1)
            x = self.encoder(x, mask=causal)
            return self.lm_head(self.ln_f(x))


MLP = BertEncoder = GPT2Decoder = None
if torch is not None:
    _define_modules()


def reference_module(arch: str, tiny: bool = False, **kwargs):
    """A freshly initialised (PyTorch's own init) reference module in eval mode."""
    require_torch()
    if arch == "mlp":
        m = MLP(tiny)
    elif arch == "resnet50":
        from torchvision.models.resnet import Bottleneck, ResNet
        m = (ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10, width_per_group=16) if tiny
             else ResNet(Bottleneck, [3, 4, 6, 3], num_classes=1000))
    elif arch == "bert-base":
        m = BertEncoder(tiny)
    elif arch == "gpt2":
        m = GPT2Decoder(tiny, **kwargs)
    else:
        raise EmberTorchError(f"unknown architecture '{arch}' (known: {', '.join(ARCHITECTURES)})")
    return m.eval()


def input_specs(arch: str, tiny: bool, batch: int, seq_len: int) -> List[Tuple[str, str, Tuple[int, ...], int]]:
    """(name, kind "float"|"ids"|"types", shape, id bound) of each model input, in manifest order."""
    if arch == "mlp":
        return [("input", "float", (batch, MLP_SIZES[tiny][0]), 0)]
    if arch == "resnet50":
        s = RESNET_TINY_IMAGE if tiny else RESNET_IMAGE
        return [("image", "float", (batch, 3, s, s), 0)]
    c = TRANSFORMERS[(arch, tiny)]
    if seq_len > c["positions"]:
        raise EmberTorchError(f"seq_len {seq_len} exceeds the {c['positions']} positions of {arch}")
    specs = [("input_ids", "ids", (batch, seq_len), c["vocab"])]
    if arch == "bert-base":
        specs.append(("token_type_ids", "ids", (batch, seq_len), 2))
    return specs


def random_inputs(arch: str, tiny: bool, batch: int = 2, seq_len: int = 8, seed: int = 0) -> "OrderedDict[str, np.ndarray]":
    """Inputs for one forward pass: floats in [-1, 1) (images ~ N(0, 1)), ids below each table's size,
    BERT token types 0/1."""
    rng = np.random.default_rng(seed)
    out: "OrderedDict[str, np.ndarray]" = OrderedDict()
    for name, kind, shape, bound in input_specs(arch, tiny, batch, seq_len):
        if kind == "float":
            a = rng.standard_normal(shape) if arch == "resnet50" else rng.uniform(-1.0, 1.0, shape)
            out[name] = a.astype(np.float32)
        else:
            out[name] = rng.integers(0, bound, size=shape, dtype=np.int64)
    return out


def torch_forward(module, inputs: "OrderedDict[str, np.ndarray]", fast_path: bool = True) -> List[np.ndarray]:
    """Runs the reference on inputs (in manifest input order); outputs in manifest output order.

    fast_path=False runs with autograd enabled, which keeps nn.TransformerEncoderLayer off its fused
    inference kernel (torch._transformer_encoder_layer_fwd, taken under no_grad in eval mode when the
    activation is relu/gelu, i.e. for BERT) and on the plain nn.MultiheadAttention + nn.Linear path."""
    require_torch()
    args = [torch.from_numpy(np.array(a)) for a in inputs.values()]
    with (torch.no_grad() if fast_path else torch.enable_grad()):
        out = module(*args)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return [o.detach().cpu().numpy() for o in out]


# ---------------------------------------------------------------------------------------------
# model.json helpers

def _pair(v) -> Tuple[int, int]:
    if isinstance(v, list):
        return int(v[0]), int(v[1])
    return int(v), int(v)


def layer_weight_shapes(layer: dict) -> Dict[str, Tuple[int, ...]]:
    """Expected shape of each weight role of a model.json layer (mirrors weight_specs in model/ops.cpp)."""
    op, a = layer["op"], layer.get("attrs", {})
    if op == "linear":
        return {"weight": (a["out_features"], a["in_features"]), "bias": (a["out_features"],)}
    if op == "conv2d":
        kh, kw = _pair(a.get("kernel_size", 1))
        return {"weight": (a["out_channels"], a["in_channels"] // a.get("groups", 1), kh, kw),
                "bias": (a["out_channels"],)}
    if op == "batch_norm":
        n = a["num_features"]
        return {"weight": (n,), "bias": (n,), "running_mean": (n,), "running_var": (n,)}
    if op == "layer_norm":
        n = a["normalized_shape"]
        return {"weight": (n,), "bias": (n,)}
    if op == "attention":
        e = a["embed_dim"]
        return {"in_proj_weight": (3 * e, e), "in_proj_bias": (3 * e,), "out_proj_weight": (e, e), "out_proj_bias": (e,)}
    if op == "embedding":
        return {"weight": (a["num_embeddings"], a["embedding_dim"])}
    return {}


def manifest_weights(manifest: dict) -> List[Tuple[int, str, str, str, Tuple[int, ...]]]:
    """(layer index, layer name, role, tensor name, expected shape) in file order: layer by layer, each
    layer's weights in the order of its "weights" object."""
    out = []
    for i, layer in enumerate(manifest["layers"]):
        shapes = layer_weight_shapes(layer)
        for role, tensor in layer.get("weights", {}).items():
            if role not in shapes:
                raise EmberTorchError(f"model.json: layers[{i}] '{layer['name']}' ({layer['op']}): unknown weight role '{role}'")
            out.append((i, layer["name"], role, tensor, tuple(int(d) for d in shapes[role])))
    return out


def read_manifest(model_dir: str) -> dict:
    path = os.path.join(model_dir, "model.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise EmberTorchError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise EmberTorchError(f"{path}: not JSON: {e}") from None


def detect_arch(manifest: dict) -> Tuple[str, bool]:
    """(architecture, tiny) of a manifest `ember model new` wrote, from its layer names and sizes."""
    layers = {l["name"]: l for l in manifest["layers"]}
    if "fc1" in layers and "fc3" in layers:
        return "mlp", layers["fc1"]["attrs"]["in_features"] == MLP_SIZES[True][0]
    if "conv1" in layers and "layer4.0.conv1" in layers:
        return "resnet50", layers["fc"]["attrs"]["out_features"] == 10
    for arch, first in (("bert-base", "embeddings.word_embeddings"), ("gpt2", "wte")):
        if first in layers:
            hidden = layers[first]["attrs"]["embedding_dim"]
            return arch, hidden == TRANSFORMERS[(arch, True)]["hidden"]
    raise EmberTorchError("model.json is not one of the architectures `ember model new` builds "
                          f"({', '.join(ARCHITECTURES)}); pass --arch")


# ---------------------------------------------------------------------------------------------
# Ember -> torch

def _is_tied(module) -> bool:
    return isinstance(module, GPT2Decoder) and module.lm_head.weight is module.wte.weight


def load_ember_weights(module, model_dir: str, untie: bool = True) -> List[str]:
    """Loads DIR/weights.safetensors into `module` with strict load_state_dict semantics: every
    parameter and buffer of the module must be in the file (BatchNorm's num_batches_tracked, which
    Ember does not store, excepted) and every tensor of the file must be one of them; a missing or
    unexpected key or a shape mismatch raises EmberTorchError listing them all.

    Tied weights (GPT-2's lm_head.weight is wte.weight): Ember stores one copy per layer. When the two
    copies differ (e.g. a model from `ember model new`, whose weights are independent), the module is
    untied first if `untie`, else that is an error. Returns notes about what was done."""
    require_torch()
    notes = []
    weights = read_safetensors(os.path.join(model_dir, "weights.safetensors"))
    expected = module.state_dict()
    skipped = [k for k in expected if k.endswith("num_batches_tracked")]
    missing = [k for k in expected if k not in weights and k not in skipped]
    unexpected = [k for k in weights if k not in expected]
    mismatched = [f"{k}: file {tuple(weights[k].shape)}, module {tuple(expected[k].shape)}"
                  for k in expected if k in weights and tuple(weights[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or mismatched:
        parts = []
        if missing:
            parts.append("missing keys: " + ", ".join(missing))
        if unexpected:
            parts.append("unexpected keys: " + ", ".join(unexpected))
        if mismatched:
            parts.append("shape mismatches: " + "; ".join(mismatched))
        raise EmberTorchError(f"{model_dir}: weights do not match {type(module).__name__}: " + "; ".join(parts))
    if _is_tied(module) and not np.array_equal(weights["wte.weight"], weights["lm_head.weight"]):
        if not untie:
            raise EmberTorchError(f"{model_dir}: lm_head.weight differs from wte.weight but the module ties them")
        module.untie()
        notes.append("lm_head.weight differs from wte.weight in the file: untied the module's LM head")
    state = OrderedDict()
    for k, v in module.state_dict().items():
        state[k] = v.clone() if k in skipped else torch.from_numpy(np.array(weights[k], dtype=np.float32))
    result = module.load_state_dict(state, strict=True)
    if result.missing_keys or result.unexpected_keys:  # strict=True raises first; kept for clarity
        raise EmberTorchError(f"load_state_dict: missing {result.missing_keys}, unexpected {result.unexpected_keys}")
    return notes


def load_ember_model(model_dir: str, arch: Optional[str] = None, tiny: Optional[bool] = None):
    """The reference module for an Ember model directory, with the directory's weights loaded.
    Returns (module, arch, tiny, notes)."""
    manifest = read_manifest(model_dir)
    if arch is None or tiny is None:
        a, t = detect_arch(manifest)
        arch = arch or a
        tiny = t if tiny is None else tiny
    module = reference_module(arch, tiny)
    notes = load_ember_weights(module, model_dir)
    return module, arch, tiny, notes


# ---------------------------------------------------------------------------------------------
# torch -> Ember (import)

def find_ember(explicit: Optional[str] = None) -> str:
    """--ember PATH, else $EMBER, else build/bin/ember of this checkout, else `ember` on PATH."""
    def usable(path: str) -> bool:
        return os.path.isfile(path) and os.access(path, os.X_OK)

    for given, what in ((explicit, "--ember"), (os.environ.get("EMBER"), "$EMBER")):
        if given:
            if not usable(given):
                raise EmberTorchError(f"{what} {given}: not an executable file")
            return given
    default = os.path.join(REPO_ROOT, "build", "bin", "ember")
    if usable(default):
        return default
    found = shutil.which("ember")
    if found:
        return found
    raise EmberTorchError(f"cannot find the ember binary: pass --ember PATH or set EMBER (looked for {default} and on PATH)")


def _run(cmd: Sequence[str], what: str, timeout: float = 600) -> str:
    try:
        p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EmberTorchError(f"{what}: timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
    if p.returncode != 0:
        raise EmberTorchError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


def load_state_dict_file(path: str, allow_pickle: bool = False) -> "OrderedDict[str, object]":
    """A state dict from a .pt/.pth file: a dict of tensors, a checkpoint holding one under
    "state_dict"/"model", or (with allow_pickle) a whole pickled nn.Module."""
    require_torch()
    try:
        obj = torch.load(path, map_location="cpu", weights_only=not allow_pickle)
    except FileNotFoundError:
        raise EmberTorchError(f"{path}: no such file") from None
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a bad file
        e = str(e).split("WeightsUnpickler error: ")[-1]
        hint = "" if allow_pickle else (" (if it is a whole pickled model rather than a state_dict, save "
                                        "model.state_dict() instead, or pass --allow-pickle for a file you trust)")
        raise EmberTorchError(f"{path}: cannot load: {e}{hint}") from None
    if isinstance(obj, nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, dict):
        for key in ("state_dict", "model", "model_state_dict"):
            if key in obj and isinstance(obj[key], dict) and not torch.is_tensor(obj[key]):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(torch.is_tensor(v) for v in obj.values()):
        raise EmberTorchError(f"{path}: expected a state dict (a dict of tensor names to tensors)")
    return OrderedDict(obj)


# Weights PyTorch ties: when the state dict lacks the key, the tied tensor is used.
TIED = {"gpt2": {"lm_head.weight": "wte.weight"}}


def _prefix_hint(missing: str, keys: Iterable[str]) -> str:
    """A hint when a key matches with a prefix, as DataParallel ('module.') or wrapper modules produce."""
    for k in keys:
        if k.endswith("." + missing):
            prefix = k[: -len(missing)]
            return f" (the state dict has '{k}': pass --strip-prefix {prefix})"
    return ""


def import_state_dict(arch: str, tiny: bool, state_dict, out_dir: str, ember: Optional[str] = None,
                      name: Optional[str] = None, force: bool = False, log=print) -> dict:
    """Writes an Ember model directory from a PyTorch state dict: model.json from
    `ember model new --manifest-only`, then weights.safetensors with every tensor model.json names, in
    layer order. Raises EmberTorchError for a missing key, a shape mismatch or a non-float tensor;
    warns (via `log`) about state-dict keys no layer uses. Everything is written to a staging
    directory, validated with `ember model inspect`, then moved into out_dir, so a failed import leaves
    no partial model behind. Returns a summary dict."""
    require_torch()
    if arch not in ARCHITECTURES:
        raise EmberTorchError(f"unknown architecture '{arch}' (known: {', '.join(ARCHITECTURES)})")
    ember = find_ember(ember)
    for f in ("model.json", "weights.safetensors"):
        if os.path.exists(os.path.join(out_dir, f)) and not force:
            raise EmberTorchError(f"{out_dir}/{f} exists (pass --force to overwrite)")
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ember-import-", dir=parent) as stage:
        cmd = [ember, "model", "new", "--arch", arch, "--manifest-only", "--out", stage]
        if tiny:
            cmd.append("--tiny")
        if name:
            cmd += ["--name", name]
        _run(cmd, "ember model new")
        manifest = read_manifest(stage)

        tensors, errors, used = [], [], set()
        for index, layer, role, tensor, shape in manifest_weights(manifest):
            key = tensor
            if key not in state_dict and tensor in TIED.get(arch, {}) and TIED[arch][tensor] in state_dict:
                key = TIED[arch][tensor]
                log(f"note: '{tensor}' is not in the state dict; using the tied '{key}'")
            if key not in state_dict:
                errors.append(f"missing key '{tensor}' (layers[{index}] '{layer}', role {role}, "
                              f"expected shape {list(shape)}){_prefix_hint(tensor, state_dict)}")
                continue
            t = state_dict[key]
            used.add(key)
            if not t.is_floating_point():
                errors.append(f"'{key}': dtype {t.dtype}, expected a floating-point tensor")
                continue
            if tuple(t.shape) != shape:
                errors.append(f"shape mismatch for '{key}' (layers[{index}] '{layer}', role {role}): "
                              f"state dict {list(t.shape)}, Ember expects {list(shape)}")
                continue
            tensors.append((tensor, t.detach().to(torch.float32).contiguous().cpu().numpy()))
        if errors:
            raise EmberTorchError(f"cannot import into {arch}{' (tiny)' if tiny else ''} "
                                  f"({len(errors)} problem(s)):\n  " + "\n  ".join(errors))
        skipped = [k for k in state_dict if k.endswith("num_batches_tracked")]
        unused = [k for k in state_dict if k not in used and k not in skipped]
        for k in unused:
            log(f"warning: state dict key '{k}' {list(state_dict[k].shape)} is not used by any layer")
        size = write_safetensors(os.path.join(stage, "weights.safetensors"), tensors,
                                 {"format": "pt", "ember.imported_from": "pytorch state_dict"})
        _run([ember, "model", "inspect", stage], "ember model inspect (validating the import)")
        os.makedirs(out_dir, exist_ok=True)
        # Weights first, then model.json: a reader that finds model.json finds its weights.
        os.replace(os.path.join(stage, "weights.safetensors"), os.path.join(out_dir, "weights.safetensors"))
        os.replace(os.path.join(stage, "model.json"), os.path.join(out_dir, "model.json"))
    return {"dir": out_dir, "tensors": len(tensors), "bytes": size, "unused": unused,
            "values": int(sum(a.size for _, a in tensors))}


# ---------------------------------------------------------------------------------------------
# Comparison: ember run vs the reference

def ember_run(ember: str, model_dir: str, inputs: "OrderedDict[str, np.ndarray]", work_dir: str,
              layers: Optional[str] = None, tag: str = "run", threads: Optional[int] = None,
              timeout: float = 600) -> "OrderedDict[str, np.ndarray]":
    """`ember run DIR --input ... --output ... --repeat 0 --device sim`; returns the written outputs."""
    in_path = os.path.join(work_dir, f"{tag}.inputs.safetensors")
    out_path = os.path.join(work_dir, f"{tag}.outputs.safetensors")
    write_safetensors(in_path, inputs.items())
    cmd = [ember, "run", model_dir, "--input", in_path, "--output", out_path, "--repeat", "0", "--device", "sim"]
    if layers:
        cmd += ["--layers", layers]
    if threads:
        cmd += ["--threads", str(threads)]
    _run(cmd, "ember run", timeout=timeout)
    return read_safetensors(out_path)


def error_ratio(ember_out: np.ndarray, torch_out: np.ndarray) -> float:
    """max|ember - torch| / max|torch|, in float64."""
    e, t = np.asarray(ember_out, np.float64), np.asarray(torch_out, np.float64)
    if e.shape != t.shape:
        raise EmberTorchError(f"shape mismatch: ember {e.shape}, torch {t.shape}")
    if not np.all(np.isfinite(e)):
        return float("inf")
    scale = np.max(np.abs(t))
    return float(np.max(np.abs(e - t)) / scale) if scale > 0 else float(np.max(np.abs(e - t)))


def compare_outputs(manifest: dict, ember_outputs: Dict[str, np.ndarray], torch_outputs: List[np.ndarray]) -> "OrderedDict[str, float]":
    """Error ratio per manifest output (matched by position to the reference's outputs)."""
    names = [o["name"] for o in manifest["outputs"]]
    if len(names) != len(torch_outputs):
        raise EmberTorchError(f"model declares {len(names)} outputs, the reference returned {len(torch_outputs)}")
    ratios: "OrderedDict[str, float]" = OrderedDict()
    for name, ref in zip(names, torch_outputs):
        if name not in ember_outputs:
            raise EmberTorchError(f"ember wrote no output '{name}' (it wrote {list(ember_outputs)})")
        ratios[name] = error_ratio(ember_outputs[name], ref)
    return ratios


# ---------------------------------------------------------------------------------------------
# Command line

def _cmd_import(args) -> int:
    require_torch()
    if args.torchvision:
        if args.arch != "resnet50" or args.tiny:
            raise EmberTorchError("--torchvision resnet50 needs --arch resnet50 (full size, no --tiny)")
        import torchvision
        torch.manual_seed(args.seed)
        # weights=None: torchvision's own random initialisation, never a download.
        state = torchvision.models.resnet50(weights=None).state_dict()
        print(f"source: torchvision.models.resnet50(weights=None), random init with torch seed {args.seed}")
    else:
        state = load_state_dict_file(args.state_dict, allow_pickle=args.allow_pickle)
        print(f"source: {args.state_dict} ({len(state)} tensors)")
    if args.strip_prefix:
        n = sum(k.startswith(args.strip_prefix) for k in state)
        state = OrderedDict((k[len(args.strip_prefix):] if k.startswith(args.strip_prefix) else k, v)
                            for k, v in state.items())
        print(f"stripped '{args.strip_prefix}' from {n} key(s)")
    summary = import_state_dict(args.arch, args.tiny, state, args.out, ember=args.ember, name=args.name, force=args.force)
    print(f"wrote {summary['dir']}: {summary['tensors']} tensors, {summary['values']:,} values, "
          f"{summary['bytes']:,} bytes of weights.safetensors"
          + (f" ({len(summary['unused'])} unused state-dict keys, see warnings)" if summary["unused"] else ""))
    return 0


def _cmd_compare(args) -> int:
    require_torch()
    ember = find_ember(args.ember)
    manifest = read_manifest(args.dir)
    arch, tiny = detect_arch(manifest) if not args.arch else (args.arch, args.tiny)
    if args.state_dict:
        module = reference_module(arch, tiny)
        try:
            module.load_state_dict(load_state_dict_file(args.state_dict, allow_pickle=args.allow_pickle), strict=True)
        except RuntimeError as e:  # load_state_dict lists missing/unexpected keys and size mismatches
            raise EmberTorchError(f"{args.state_dict}: {e}") from None
        print(f"reference: {arch}{' (tiny)' if tiny else ''} with {args.state_dict}")
    else:
        module, arch, tiny, notes = load_ember_model(args.dir, arch, tiny)
        for n in notes:
            print("note: " + n)
        print(f"reference: {arch}{' (tiny)' if tiny else ''} with the weights of {args.dir}")
    torch.set_num_threads(max(1, args.threads or os.cpu_count() or 1))
    inputs = random_inputs(arch, tiny, args.batch, args.seq_len, args.seed)
    with tempfile.TemporaryDirectory(prefix="ember_torch_") as work:
        outs = ember_run(ember, args.dir, inputs, work, threads=args.threads)
    ratios = compare_outputs(manifest, outs, torch_forward(module, inputs))
    worst = 0.0
    for name, r in ratios.items():
        print(f"output '{name}': max|ember - torch| / max|torch| = {r:.3e}")
        worst = max(worst, r)
    ok = worst < args.tolerance
    print(("OK" if ok else "MISMATCH") + f": worst {worst:.3e} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="ember_torch.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    imp = sub.add_parser("import", help="write an Ember model directory from PyTorch weights")
    imp.add_argument("--arch", required=True, choices=ARCHITECTURES)
    imp.add_argument("--tiny", action="store_true", help="the tiny variant (as `ember model new --tiny`)")
    src = imp.add_mutually_exclusive_group(required=True)
    src.add_argument("--state-dict", metavar="FILE.pt", help="torch.save(model.state_dict(), FILE.pt)")
    src.add_argument("--torchvision", choices=["resnet50"],
                     help="construct torchvision's model with its random init (never downloads weights)")
    imp.add_argument("--out", required=True, metavar="DIR", help="model version directory to write")
    imp.add_argument("--strip-prefix", metavar="PREFIX", help="remove PREFIX from state-dict keys (e.g. 'module.')")
    imp.add_argument("--name", help="model name (default: the architecture's)")
    imp.add_argument("--seed", type=int, default=0, help="torch seed for --torchvision's init (default 0)")
    imp.add_argument("--force", action="store_true", help="overwrite an existing model in DIR")
    imp.add_argument("--allow-pickle", action="store_true",
                     help="accept a whole pickled model (runs code from the file: trusted files only)")
    imp.add_argument("--ember", help="path of the ember binary (default: $EMBER, then build/bin/ember)")
    imp.set_defaults(func=_cmd_import)

    cmp_ = sub.add_parser("compare", help="run a model with ember and with the PyTorch reference, compare outputs")
    cmp_.add_argument("dir", help="Ember model directory")
    cmp_.add_argument("--arch", choices=ARCHITECTURES, help="default: detected from model.json")
    cmp_.add_argument("--tiny", action="store_true")
    cmp_.add_argument("--state-dict", metavar="FILE.pt",
                      help="reference weights (default: load the model directory's own weights into torch)")
    cmp_.add_argument("--allow-pickle", action="store_true")
    cmp_.add_argument("--batch", type=int, default=2)
    cmp_.add_argument("--seq-len", type=int, default=8)
    cmp_.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    cmp_.add_argument("--threads", type=int, default=0, help="compute threads for ember and torch (0: all)")
    cmp_.add_argument("--tolerance", type=float, default=1e-4)
    cmp_.add_argument("--ember", help="path of the ember binary (default: $EMBER, then build/bin/ember)")
    cmp_.set_defaults(func=_cmd_compare)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except EmberTorchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
