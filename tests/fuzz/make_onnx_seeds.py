#!/usr/bin/env python3
"""Writes the committed seeds of onnx_fuzzer (tests/fuzz/corpus/onnx/): tiny modules exported by
torch.onnx.export, small enough (a few KiB) to keep libFuzzer's -max_len low, covering the op
mappings (opsets 9 to 17), the folded shape arithmetic, the fused patterns and a refusal.

  /usr/bin/python3 tests/fuzz/make_onnx_seeds.py [OUT_DIR]   (default: tests/fuzz/corpus/onnx)

Run it again only to change the seeds; the fuzz tests read the committed files.
"""

import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, groups=2, bias=False)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, stride=2, padding=1)
        y = y + F.avg_pool2d(self.conv2(y), 3, stride=1, padding=1)
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.fc(y), dim=1)


class Mlp(nn.Module):
    def __init__(self, tanh: bool, norm: bool = True):
        super().__init__()
        self.tanh = tanh
        self.use_norm = norm
        self.fc1 = nn.Linear(6, 8)
        self.norm = nn.LayerNorm(8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc1(x)
        y = F.gelu(self.norm(y) if self.use_norm else y, approximate="tanh" if self.tanh else "none")
        y = torch.tanh(self.fc2(y))
        return y.reshape(y.shape[0], -1)


class OldOps(nn.Module):
    """The ops whose form before opset 11 differs (Clip, Slice, Pad with attributes; Upsample-9 or
    Resize-10; TopK-1 or -10), as torch writes them at opsets 9 and 10."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x):
        y = F.relu6(self.conv(x))[:, 1:3, :, 1:-1]
        y = F.interpolate(F.pad(y, (1, 0, 0, 1), value=0.5), scale_factor=2.0, mode="nearest")
        return torch.topk(F.avg_pool2d(y, 2).flatten(1), 3).values


def export(module, example, path, opset, dynamic, keep_batch_norm=False):
    # PRESERVE on a module in eval mode keeps BatchNormalization nodes (inference ones) instead of
    # folding them into the convolutions.
    mode = torch.onnx.TrainingMode.PRESERVE if keep_batch_norm else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), example, path, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes=dynamic, training=mode)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "onnx")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    batch = {"x": {0: "batch"}, "y": {0: "batch"}}
    export(ConvNet(), torch.randn(1, 2, 8, 8), os.path.join(out, "convnet-opset13.onnx"), 13, batch)
    export(ConvNet(), torch.randn(1, 2, 8, 8), os.path.join(out, "convnet-batchnorm-opset11.onnx"), 11, batch,
           keep_batch_norm=True)
    export(Mlp(False), torch.randn(2, 3, 6), os.path.join(out, "mlp-gelu-opset17.onnx"), 17, batch)
    export(Mlp(True), torch.randn(2, 3, 6), os.path.join(out, "mlp-gelu-tanh-opset17.onnx"), 17, batch)
    export(Mlp(False, norm=False), torch.randn(2, 3, 6), os.path.join(out, "mlp-gelu-opset11.onnx"), 11, batch)
    export(Mlp(False), torch.randn(2, 3, 6), os.path.join(out, "mlp-refused-opset13.onnx"), 13, batch)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1)
    export(enc, torch.randn(2, 3, 8), os.path.join(out, "encoder-refused-opset17.onnx"), 17,
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    export(OldOps(), torch.randn(1, 2, 6, 6), os.path.join(out, "oldops-opset9.onnx"), 9, batch)
    export(OldOps(), torch.randn(1, 2, 6, 6), os.path.join(out, "oldops-opset10.onnx"), 10, batch)
    for name in sorted(os.listdir(out)):
        print(f"{name}: {os.path.getsize(os.path.join(out, name))} bytes")


if __name__ == "__main__":
    main()
