#!/usr/bin/env python3
"""`ember model import` end to end: models exported by Debian's PyTorch with torch.onnx.export,
imported, run by `ember run`, and compared with PyTorch on the same input.

  torch_onnx_test.py --ember PATH CASE

Cases (one CTest entry each, tests/importer/CMakeLists.txt):
  torchvision_resnet   torchvision resnet18 (weights=None, torch.manual_seed(0), eval), exported at
                       opsets 13 and 17 with a dynamic batch axis; imported; `ember run` at batch 1
                       and 4 against PyTorch: max|ember - torch| / max|torch| <= 1e-4 (fp32). A
                       negative control (PyTorch on an input moved by 1e-2) must fail that check.
  torch_modules        small modules that cover the rest of the mapping (BatchNormalization kept by
                       TrainingMode.PRESERVE, grouped convolution, AvgPool2d(padding) written as Pad +
                       AveragePool, residual Add, Softmax, erf and tanh GELU, LayerNormalization,
                       a reshape on the dynamic batch), at opsets 9 to 17 and batches 1 and 3,
                       against PyTorch at the same tolerance.
  general_ops          modules built to exercise the lowerings onto the general ops (hardswish,
                       sigmoid products, clamp, chunk/cat/slice, ceil_mode and count_include_pad
                       pools, ConvTranspose2d, InstanceNorm2d, bilinear and nearest resize, Conv1d,
                       max_pool1d, transposes, matmul of activations, log_softmax, where, pow,
                       reductions, topk, gather by a list), at opsets 11, 13 and 17 and batches 1 and
                       3, against PyTorch at the same tolerance; and a module of the ops whose ONNX
                       form before opset 11 differs (Clip, Slice, Pad with its bounds as attributes,
                       Upsample-9 and Resize-10, TopK-1 and -10, pools without ceil_mode) at opsets 9
                       and 10.
  transformer_encoder  torch.nn.TransformerEncoder with batch and sequence free, at opsets 13 and 17
                       (its attention reshapes [seq * batch, 16] to [seq, batch, 16]: two free dims
                       move, which reshape's like_dims express): imported and run against PyTorch.
  cli_errors           a truncated .onnx file and a missing one: exit status 2 and a clear message.

Exit status: 0 pass, 1 fail, 77 skipped (numpy, torch or torchvision not importable).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
TOLERANCE = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy, torch and torchvision importable by {sys.executable}: {e}")
    sys.exit(SKIP)

sys.path.insert(0, os.path.join(REPO, "tools"))
import ember_torch as et  # noqa: E402  (safetensors in pure Python)

THREADS = int(os.environ.get("EMBER_REFERENCE_THREADS", "1"))
torch.set_num_threads(THREADS)


class Failure(Exception):
    pass


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Failure(message)


def ember(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def export(module, example, path: str, opset: int, names, dynamic, keep_batch_norm: bool = False) -> None:
    # torch 1.13's exporter warns about every constant it folds; only failures matter here.
    # PRESERVE on a module in eval mode keeps (inference) BatchNormalization nodes.
    import warnings
    mode = torch.onnx.TrainingMode.PRESERVE if keep_batch_norm else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, path, opset_version=opset, input_names=names[0], output_names=names[1],
                          dynamic_axes=dynamic, training=mode)


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


def case_torchvision_resnet(binary: str, tmp: str) -> None:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    worst = 0.0
    for opset in (13, 17):
        onnx_file = os.path.join(tmp, f"resnet18_opset{opset}.onnx")
        export(model, torch.randn(1, 3, 224, 224), onnx_file, opset, (["input"], ["logits"]),
               {"input": {0: "batch"}, "logits": {0: "batch"}})
        out_dir = os.path.join(tmp, f"resnet18_{opset}")
        t0 = time.monotonic()
        p = ember(binary, "model", "import", onnx_file, "--out", out_dir, "--name", "resnet18")
        check(p.returncode == 0, f"import failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        print(f"opset {opset}: imported in {time.monotonic() - t0:.1f} s: {p.stdout.strip().splitlines()[0]}")
        check("input:float32[-1, 3, 224, 224]" in p.stdout and "logits:float32[-1, 1000]" in p.stdout,
              f"the batch dim is not free:\n{p.stdout}")
        for batch in (1, 4):
            x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(100 + batch))
            with torch.no_grad():
                want = model(x).numpy().astype(np.float64)
            inputs = os.path.join(tmp, "input.safetensors")
            outputs = os.path.join(tmp, "output.safetensors")
            et.write_safetensors(inputs, [("input", x.numpy())])
            p = ember(binary, "run", out_dir, "--input", inputs, "--output", outputs, "--repeat", "0",
                      "--threads", str(THREADS), "--device", "sim")
            check(p.returncode == 0, f"ember run failed ({p.returncode}):\n{p.stderr}{p.stdout}")
            got = et.read_safetensors(outputs)["logits"]
            check(got.shape == want.shape, f"output shape {got.shape}, PyTorch's {want.shape}")
            err = rel_error(got, want)
            worst = max(worst, err)
            print(f"opset {opset}, batch {batch}: max relative error {err:.3g}")
            check(err <= TOLERANCE, f"opset {opset}, batch {batch}: max relative error {err:.3g} > {TOLERANCE}")
            # Negative control: the same check against PyTorch on a moved input must fail.
            with torch.no_grad():
                moved = model(x + 1e-2).numpy().astype(np.float64)
            check(rel_error(got, moved) > TOLERANCE, "negative control: a moved input passed the check")
    print(f"worst max relative error {worst:.3g} (tolerance {TOLERANCE})")


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=4, bias=False)
        self.pool = torch.nn.AvgPool2d(3, stride=1, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 3, stride=2, padding=1)
        y = y + self.pool(self.conv2(y))
        return torch.softmax(self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1)), dim=1)


class Mlp(torch.nn.Module):
    def __init__(self, approximate: str, norm: bool):
        super().__init__()
        self.approximate, self.use_norm = approximate, norm
        self.fc1, self.norm, self.fc2 = torch.nn.Linear(6, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)

    def forward(self, x):
        y = self.fc1(x)
        y = torch.nn.functional.gelu(self.norm(y) if self.use_norm else y, approximate=self.approximate)
        y = torch.tanh(self.fc2(y))
        return y.reshape(y.shape[0], -1)


def compare(binary: str, tmp: str, module, example_shape, tag: str) -> float:
    out_dir = os.path.join(tmp, tag)
    worst = 0.0
    for batch in (1, 3):
        x = torch.randn(batch, *example_shape[1:], generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            want = module(x).numpy().astype(np.float64)
        inputs, outputs = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
        et.write_safetensors(inputs, [("x", x.numpy())])
        p = ember(binary, "run", out_dir, "--input", inputs, "--output", outputs, "--repeat", "0", "--threads",
                  str(THREADS), "--device", "sim")
        check(p.returncode == 0, f"{tag}: ember run failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        got = et.read_safetensors(outputs)["y"]
        check(got.shape == want.shape, f"{tag}: output shape {got.shape}, PyTorch's {want.shape}")
        err = rel_error(got, want)
        print(f"{tag}, batch {batch}: max relative error {err:.3g}")
        check(err <= TOLERANCE, f"{tag}, batch {batch}: max relative error {err:.3g} > {TOLERANCE}")
        worst = max(worst, err)
    return worst


def case_torch_modules(binary: str, tmp: str) -> None:
    torch.manual_seed(0)
    conv = ConvNet().eval()
    with torch.no_grad():  # statistics other than the defaults, so batch norm is not the identity
        conv.bn.running_mean.uniform_(-0.5, 0.5)
        conv.bn.running_var.uniform_(0.5, 2.0)
        conv.bn.weight.uniform_(0.5, 1.5)
    modules = [
        (conv, (1, 3, 16, 16), 9, True, {}),
        (conv, (1, 3, 16, 16), 10, False, {}),
        (conv, (1, 3, 16, 16), 11, True, {}),
        (conv, (1, 3, 16, 16), 13, False, {}),
        (Mlp("none", True).eval(), (2, 5, 6), 17, False, {"layer_norm": 1, "gelu": 1}),
        (Mlp("tanh", True).eval(), (2, 5, 6), 17, False, {"layer_norm": 1, "gelu": 1}),
        (Mlp("none", False).eval(), (2, 5, 6), 11, False, {"gelu": 1}),
    ]
    worst = 0.0
    for i, (module, shape, opset, keep_bn, must_have) in enumerate(modules):
        tag = f"{type(module).__name__.lower()}{i}_opset{opset}"
        onnx_file = os.path.join(tmp, tag + ".onnx")
        export(module, torch.randn(*shape), onnx_file, opset, (["x"], ["y"]), {"x": {0: "batch"}, "y": {0: "batch"}},
               keep_batch_norm=keep_bn)
        p = ember(binary, "model", "import", onnx_file, "--out", os.path.join(tmp, tag))
        check(p.returncode == 0, f"{tag}: import failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        p = ember(binary, "model", "inspect", os.path.join(tmp, tag), "--json")
        ops = [layer["op"] for layer in json.loads(p.stdout)["layer_table"]]
        print(f"{tag}: {' '.join(ops)}")
        if keep_bn:
            must_have = {"batch_norm": 1, "avg_pool2d": 1, "pad": 0}
        for op, count in must_have.items():
            check(ops.count(op) == count, f"{tag}: expected {count} {op} layer(s), got {ops}")
        worst = max(worst, compare(binary, tmp, module, shape, tag))
    print(f"worst max relative error {worst:.3g} (tolerance {TOLERANCE})")


class Vision(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.norm = torch.nn.InstanceNorm2d(4, affine=True)

    def forward(self, x):
        F = torch.nn.functional
        y = F.hardswish(self.conv(x))
        y = torch.clamp(y * torch.sigmoid(y), -1.0, 3.0)
        a, b = torch.chunk(y, 2, dim=1)
        y = torch.cat([b, a, F.hardsigmoid(a)], 1)[:, 2:10]
        y = F.max_pool2d(y, 3, 2, ceil_mode=True)
        y = self.norm(self.up(y))
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = F.avg_pool2d(y, 3, 2, padding=1, count_include_pad=False)
        y = F.interpolate(F.leaky_relu(y, 0.1), scale_factor=2.0, mode="nearest")
        return torch.cat([y.mean(dim=(2, 3)), y.amax(dim=(2, 3))], 1)


class Sequence(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 6, 3, padding=1)
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x):  # [batch, 4, 10]
        F = torch.nn.functional
        y = F.elu(self.conv(x)).transpose(1, 2)  # [batch, 10, 6]
        s = F.log_softmax(torch.matmul(y, y.transpose(1, 2)) / 4.0, dim=-1)
        y = torch.matmul(torch.exp(s), self.fc(y))
        y = torch.where(y > 0, y, y * 0.5)
        y = F.max_pool1d(y.transpose(1, 2), 2)  # [batch, 6, 5]
        return torch.pow(y.abs() + 1.0, 1.5) - y.amax(dim=2, keepdim=True)


class Pick(torch.nn.Module):
    def forward(self, x):  # [batch, 10]
        v = torch.topk(x, 3).values
        g = x[:, [1, 3, 5]]
        return torch.cat([v * g, torch.nn.functional.softplus(x[:, :3]), torch.erf(x[:, -3:])], 1)


class Old(torch.nn.Module):
    """What torch.onnx.export writes at opsets 9 and 10 in the forms those opsets have: Clip's bounds,
    Slice's starts/ends/axes (opset 9) and Pad's pads/value as attributes, Upsample-9 (opset 9) and
    Resize-10 (opset 10), TopK's k as an attribute (9) or input (10), pools without ceil_mode (9)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):  # [batch, 3, 8, 8]
        F = torch.nn.functional
        y = F.relu6(self.conv(x) * 3.0)
        y = torch.clamp(y[:, 1:5, :, 1:-1] - 1.0, min=-0.5)  # [batch, 4, 8, 6]
        y = F.pad(y, (1, 2, 0, 1), value=0.25)  # [batch, 4, 9, 9]
        y = F.avg_pool2d(y, 3, 2, padding=1, count_include_pad=False)  # [batch, 4, 5, 5]
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")  # [batch, 4, 10, 10]
        y = F.max_pool2d(F.pad(y, (1, 1, 1, 1), mode="reflect"), 2)  # [batch, 4, 6, 6]
        a, b = torch.chunk(y.flatten(1), 2, dim=1)
        return torch.cat([torch.topk(a, 5).values, F.hardsigmoid(b[:, :7])], 1)


def case_general_ops(binary: str, tmp: str) -> None:
    torch.manual_seed(0)
    vision, sequence, pick, old = Vision().eval(), Sequence().eval(), Pick().eval(), Old().eval()
    modules = [(vision, (1, 3, 16, 16), 11), (vision, (1, 3, 16, 16), 17), (sequence, (1, 4, 10), 13),
               (sequence, (1, 4, 10), 17), (pick, (1, 10), 13), (old, (1, 3, 8, 8), 9), (old, (1, 3, 8, 8), 10)]
    worst = 0.0
    for i, (module, shape, opset) in enumerate(modules):
        tag = f"{type(module).__name__.lower()}{i}_opset{opset}"
        onnx_file = os.path.join(tmp, tag + ".onnx")
        export(module, torch.randn(*shape), onnx_file, opset, (["x"], ["y"]), {"x": {0: "batch"}, "y": {0: "batch"}})
        p = ember(binary, "model", "import", onnx_file, "--out", os.path.join(tmp, tag))
        check(p.returncode == 0, f"{tag}: import failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        worst = max(worst, compare(binary, tmp, module, shape, tag))
    print(f"worst max relative error {worst:.3g} (tolerance {TOLERANCE})")


def case_transformer_encoder(binary: str, tmp: str) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=1).eval()
    for opset in (13, 17):
        tag = f"encoder_opset{opset}"
        onnx_file = os.path.join(tmp, tag + ".onnx")
        export(encoder, torch.randn(2, 5, 16), onnx_file, opset, (["x"], ["y"]),
               {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
        p = ember(binary, "model", "import", onnx_file, "--out", os.path.join(tmp, tag))
        print(f"opset {opset}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        check(p.returncode == 0, f"opset {opset}: exit status {p.returncode}, expected 0")
        compare(binary, tmp, encoder, (2, 5, 16), tag)


def case_cli_errors(binary: str, tmp: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    onnx_file = os.path.join(tmp, "linear.onnx")
    export(model, torch.randn(2, 4), onnx_file, 13, (["x"], ["y"]), {"x": {0: "batch"}, "y": {0: "batch"}})
    p = ember(binary, "model", "import", onnx_file, "--out", os.path.join(tmp, "ok"))
    check(p.returncode == 0, f"the untruncated file does not import:\n{p.stderr}")
    data = open(onnx_file, "rb").read()
    truncated = os.path.join(tmp, "truncated.onnx")
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    p = ember(binary, "model", "import", truncated, "--out", os.path.join(tmp, "bad"))
    check(p.returncode == 2, f"truncated: exit status {p.returncode}, expected 2")
    check("truncated.onnx: not an ONNX model: the protobuf does not parse" in p.stderr, f"truncated: {p.stderr}")
    p = ember(binary, "model", "import", os.path.join(tmp, "none.onnx"), "--out", os.path.join(tmp, "bad"))
    check(p.returncode == 2 and "none.onnx" in p.stderr, f"missing file: {p.returncode} {p.stderr}")
    p = ember(binary, "model", "import", onnx_file, "--out", os.path.join(tmp, "bad"), "--batch-dim", "x")
    check(p.returncode == 2 and "--batch-dim" in p.stderr, f"bad --batch-dim: {p.returncode} {p.stderr}")


CASES = {
    "torchvision_resnet": case_torchvision_resnet,
    "torch_modules": case_torch_modules,
    "general_ops": case_general_ops,
    "transformer_encoder": case_transformer_encoder,
    "cli_errors": case_cli_errors,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ember-onnx-") as tmp:
        try:
            CASES[args.case](os.path.abspath(args.ember), tmp)
        except Failure as e:
            print(f"FAIL: {e}")
            return 1
    print(f"PASS {args.case} in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
