#!/usr/bin/env python3
"""Ember against PyTorch: the same weights and inputs through `ember run` and through reference
modules built from torch.nn / torchvision (tools/ember_torch.py), compared output by output.

  reference_test.py --ember PATH CASE      (CASE: see CASES below; `--list` prints them)

Each case is one CTest entry (tests/reference/CMakeLists.txt). A comparison passes when
max|ember - torch| / max|torch| < 1e-4 for every output; the measured ratio is printed. Tiny-model
cases also run a negative control (the reference with its first layer's weights scaled by 1 + 1e-3
must fail the same check), so a comparison that cannot fail would be noticed.

Exit status: 0 pass, 1 fail, 77 skipped (torch, torchvision or numpy not importable).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
TOLERANCE = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(REPO, "tools", "ember_torch.py")

try:
    import numpy as np
    import torch
    import torchvision  # noqa: F401 - ResNet-50 comes from torchvision
except ImportError as e:  # pragma: no cover
    print(f"SKIP: the PyTorch reference needs numpy, torch and torchvision importable by {sys.executable}: {e}")
    sys.exit(SKIP)

sys.path.insert(0, os.path.join(REPO, "tools"))
import ember_torch as et  # noqa: E402

# Threads per process: CTest runs two cases at once on a 2-core machine.
THREADS = int(os.environ.get("EMBER_REFERENCE_THREADS", "1"))
torch.set_num_threads(THREADS)


class Failure(Exception):
    pass


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Failure(message)


def ember_cmd(ember: str, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([ember, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if expect_ok and p.returncode != 0:
        raise Failure(f"ember {' '.join(args)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
    return p


def new_model(ember: str, work: str, arch: str, tiny: bool, seed: int) -> str:
    d = os.path.join(work, f"{arch}{'-tiny' if tiny else ''}-s{seed}")
    ember_cmd(ember, "model", "new", "--arch", arch, *(["--tiny"] if tiny else []), "--seed", str(seed), "--out", d)
    return d


def compare(ember: str, work: str, model_dir: str, manifest: dict, module, inputs, label: str,
            both_paths: bool = False) -> float:
    """ember run vs the reference on `inputs`; with both_paths, also vs torch's non-fused path."""
    outs = et.ember_run(ember, model_dir, inputs, work, tag=label.replace(" ", "_"), threads=THREADS)
    shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in inputs.items())
    worst = 0.0
    for fast in ((True, False) if both_paths else (True,)):
        ratios = et.compare_outputs(manifest, outs, et.torch_forward(module, inputs, fast_path=fast))
        path = "" if not both_paths else (" torch no_grad" if fast else " torch autograd path")
        for name, r in ratios.items():
            print(f"  {label} [{shapes}]{path} output '{name}': max|ember - torch| / max|torch| = {r:.3e}")
            check(r < TOLERANCE, f"{label}: output '{name}' differs from PyTorch{path}: ratio {r:.3e} >= {TOLERANCE:g}")
            worst = max(worst, r)
    return worst


def negative_control(ember: str, work: str, model_dir: str, manifest: dict, module, inputs, first_weight: str) -> None:
    """The same comparison against a reference whose first layer is off by 0.1% must fail."""
    outs = et.ember_run(ember, model_dir, inputs, work, tag="control", threads=THREADS)
    p = dict(module.named_parameters())[first_weight]
    with torch.no_grad():
        p.mul_(1.0 + 1e-3)
    try:
        ratios = et.compare_outputs(manifest, outs, et.torch_forward(module, inputs))
    finally:
        with torch.no_grad():
            p.div_(1.0 + 1e-3)
    for name, r in ratios.items():
        print(f"  negative control ({first_weight} x 1.001) output '{name}': ratio {r:.3e} (must be >= {TOLERANCE:g})")
        check(r >= TOLERANCE, f"negative control: output '{name}' did not notice a 0.1% change of {first_weight}")


FIRST_WEIGHT = {"mlp": "fc1.weight", "resnet50": "conv1.weight", "bert-base": "embeddings.word_embeddings.weight",
                "gpt2": "wte.weight"}
SEQ_LENS = (8, 32, 1)  # 32 = every position of the tiny transformers; 1 = a single token


# ---------------------------------------------------------------------------------------------
# a. tiny models from `ember model new`, their weights loaded into the reference

def case_tiny(arch: str, seed: int):
    def run(ember: str, work: str) -> None:
        d = new_model(ember, work, arch, True, seed)
        manifest = et.read_manifest(d)
        check(et.detect_arch(manifest) == (arch, True), f"detect_arch: {et.detect_arch(manifest)}")
        module, _, _, notes = et.load_ember_model(d, arch, True)
        for n in notes:
            print("  note: " + n)
        transformer = arch in ("bert-base", "gpt2")
        for i, seq in enumerate(SEQ_LENS if transformer else (0,)):
            inputs = et.random_inputs(arch, True, batch=2, seq_len=seq, seed=seed * 100 + i)
            compare(ember, work, d, manifest, module, inputs, f"{arch}-tiny", both_paths=transformer)
        inputs = et.random_inputs(arch, True, batch=2, seq_len=8, seed=seed * 100 + 50)
        negative_control(ember, work, d, manifest, module, inputs, FIRST_WEIGHT[arch])
        if arch == "mlp":
            loader_errors(d)
    return run


def loader_errors(tiny_mlp_dir: str) -> None:
    """load_ember_weights is strict: wrong architecture or wrong size is an error naming the keys."""
    for module, needles in ((et.reference_module("bert-base", True), ("missing keys: embeddings.", "unexpected keys: fc1.weight")),
                            (et.reference_module("mlp", False), ("shape mismatches: fc1.weight: file (32, 16), module (1024, 784)",))):
        try:
            et.load_ember_weights(module, tiny_mlp_dir)
        except et.EmberTorchError as e:
            check(all(x in str(e) for x in needles), f"loader error not clear: {e}")
            print(f"  strict load into {type(module).__name__}: refused ({str(e)[len(tiny_mlp_dir) + 2:][:100]}...)")
            continue
        raise Failure(f"loading a tiny MLP into {type(module).__name__} was not refused")


# ---------------------------------------------------------------------------------------------
# b. full-size models (real shapes; transformers at batch 1, 128 tokens)

def case_full(arch: str, batch: int, seed: int, seq_len: int = 128):
    def run(ember: str, work: str) -> None:
        t0 = time.monotonic()
        d = new_model(ember, work, arch, False, seed)
        manifest = et.read_manifest(d)
        module, _, _, notes = et.load_ember_model(d, arch, False)
        for n in notes:
            print("  note: " + n)
        print(f"  generated and loaded {sum(p.numel() for p in module.parameters()):,} parameters "
              f"in {time.monotonic() - t0:.1f} s")
        inputs = et.random_inputs(arch, False, batch=batch, seq_len=seq_len, seed=seed)
        compare(ember, work, d, manifest, module, inputs, arch)
    return run


# ---------------------------------------------------------------------------------------------
# c. the import tool: torch's own init -> .pt -> ember_torch.py import -> ember run vs torch

def tool(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    if p.returncode != expect:
        raise Failure(f"ember_torch.py {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stderr}{p.stdout}")
    return p


def check_layout(ember: str, model_dir: str, state: dict) -> None:
    """weights.safetensors holds exactly the manifest's tensors, layer by layer in weights order, with
    the state dict's values, and each layer's bytes are where `ember model inspect --json` says."""
    manifest = et.read_manifest(model_dir)
    expected = et.manifest_weights(manifest)
    stored = et.read_safetensors(os.path.join(model_dir, "weights.safetensors"))
    check(list(stored) == [w[3] for w in expected],
          f"tensor order in weights.safetensors differs from the manifest's layer order:\n{list(stored)}")
    per_layer = [0] * len(manifest["layers"])
    for index, _, _, tensor, shape in expected:
        a = stored[tensor]
        check(a.dtype == np.float32 and a.shape == shape, f"{tensor}: {a.dtype}{a.shape}, expected float32{shape}")
        check(np.array_equal(a, state[tensor].numpy()), f"{tensor}: values differ from the state dict")
        per_layer[index] += a.nbytes
    info = json.loads(ember_cmd(ember, "model", "inspect", "--json", model_dir).stdout)
    offset = 0
    for row in info["layer_table"]:
        i = row["index"]
        check(row["bytes"] == per_layer[i] and row["data_offset"] == offset,
              f"layer {i} '{row['name']}': inspect says {row['bytes']} bytes at {row['data_offset']}, "
              f"expected {per_layer[i]} at {offset}")
        offset += per_layer[i]


def warm_batch_norm(module, arch: str, tiny: bool, seed: int) -> None:
    """Gives BatchNorm non-trivial running statistics the way training does (train-mode passes)."""
    gen = torch.Generator().manual_seed(seed)
    module.train()
    with torch.no_grad():
        for _ in range(3):
            x = torch.from_numpy(et.random_inputs(arch, tiny, batch=4, seed=seed)["image"])
            module(x * (1.0 + torch.rand(1, generator=gen)) + torch.randn(1, generator=gen))
    module.eval()


def case_import(arch: str, seed: int):
    def run(ember: str, work: str) -> None:
        torch.manual_seed(seed)
        module = et.reference_module(arch, True)  # PyTorch's own initialisation
        if arch == "resnet50":
            warm_batch_norm(module, arch, True, seed)
        state = module.state_dict()
        pt = os.path.join(work, f"{arch}.pt")
        torch.save(state, pt)
        d = os.path.join(work, f"{arch}-imported")
        out = tool("import", "--arch", arch, "--tiny", "--state-dict", pt, "--out", d, "--ember", ember)
        print("  " + out.stdout.strip().replace("\n", "\n  "))
        check("warning" not in out.stdout + out.stderr, f"unexpected warnings:\n{out.stdout}{out.stderr}")
        check_layout(ember, d, state)
        manifest = et.read_manifest(d)
        transformer = arch in ("bert-base", "gpt2")
        for i, seq in enumerate(SEQ_LENS[:2] if transformer else (0,)):
            inputs = et.random_inputs(arch, True, batch=2, seq_len=seq, seed=seed + i)
            compare(ember, work, d, manifest, module, inputs, f"{arch}-tiny imported")
        if arch == "gpt2":
            stored = et.read_safetensors(os.path.join(d, "weights.safetensors"))
            check(np.array_equal(stored["wte.weight"], stored["lm_head.weight"]),
                  "tied wte/lm_head must be written once per layer with the same values")
            # A state dict without the tied key (as some checkpoints are saved): the tied tensor is used.
            del state["lm_head.weight"]
            torch.save(state, pt)
            out = tool("import", "--arch", arch, "--tiny", "--state-dict", pt, "--out", d, "--ember", ember, "--force")
            check("using the tied 'wte.weight'" in out.stdout, f"expected a note about the tied weight:\n{out.stdout}")
            compare(ember, work, d, manifest, module, et.random_inputs(arch, True, seed=seed), "gpt2-tiny tied-key")
        if arch == "mlp":
            import_errors(ember, work, state)
    return run


def import_errors(ember: str, work: str, state: dict) -> None:
    """The import tool's error paths: missing key and unused key through the command line (exit status,
    message), shape mismatch, existing output and an unreadable file through the module's functions."""
    def attempt(name: str, sd: dict, expect: int) -> subprocess.CompletedProcess:
        pt = os.path.join(work, f"{name}.pt")
        torch.save(sd, pt)
        return tool("import", "--arch", "mlp", "--tiny", "--state-dict", pt, "--out", os.path.join(work, name),
                    "--ember", ember, expect=expect)

    def refused(what: str, fn, *needles: str) -> None:
        try:
            fn()
        except et.EmberTorchError as e:
            check(all(x in str(e) for x in needles), f"{what} not reported clearly: {e}")
            print(f"  {what:14s} -> {str(e).strip().splitlines()[-1].strip()[:150]}")
            return
        raise Failure(f"{what} was not refused")

    sd = dict(state)
    del sd["fc2.bias"]
    p = attempt("missing", sd, 2)
    check("missing key 'fc2.bias'" in p.stderr, f"missing key not reported clearly:\n{p.stderr}")
    check(not os.path.exists(os.path.join(work, "missing")), "a failed import left files behind")
    print("  missing key    -> " + p.stderr.strip().splitlines()[-1].strip())

    sd = dict(state)
    sd["extra.weight"] = torch.zeros(3)
    p = attempt("extra", sd, 0)
    check("warning: state dict key 'extra.weight'" in p.stdout + p.stderr, f"unused key not warned about:\n{p.stdout}")
    print("  unused key     -> warning, import succeeds")

    quiet = lambda *_: None  # noqa: E731
    sd = dict(state)
    sd["fc1.weight"] = state["fc1.weight"].t().contiguous()
    refused("shape mismatch", lambda: et.import_state_dict("mlp", True, sd, os.path.join(work, "shape"), ember, log=quiet),
            "shape mismatch for 'fc1.weight'", "[16, 32]", "[32, 16]")
    refused("existing model", lambda: et.import_state_dict("mlp", True, state, os.path.join(work, "extra"), ember, log=quiet),
            "exists", "--force")
    bad = os.path.join(work, "garbage.pt")
    with open(bad, "wb") as f:
        f.write(b"not a torch file")
    refused("unreadable .pt", lambda: et.load_state_dict_file(bad), "garbage.pt: cannot load")
    refused("not a state dict", lambda: (torch.save([1, 2], bad), et.load_state_dict_file(bad)), "expected a state dict")


def case_import_torchvision(ember: str, work: str) -> None:
    """--torchvision resnet50: torchvision's own model (random init, no download), full size, batch 1."""
    d = os.path.join(work, "tv-resnet50")
    out = tool("import", "--arch", "resnet50", "--torchvision", "resnet50", "--seed", "7", "--out", d, "--ember", ember)
    print("  " + out.stdout.strip().replace("\n", "\n  "))
    torch.manual_seed(7)
    module = torchvision.models.resnet50(weights=None).eval()
    manifest = et.read_manifest(d)
    compare(ember, work, d, manifest, module, et.random_inputs("resnet50", False, batch=1, seed=7), "torchvision resnet50")


# ---------------------------------------------------------------------------------------------
# d. layer ranges: a tiny BERT run as [0, k) then [k, n), for every k

def range_inputs(manifest: dict, first: int, last: int) -> list:
    """Values layers [first, last) read that are model inputs or produced before `first`."""
    before = {i["name"] for i in manifest["inputs"]} | {l["name"] for l in manifest["layers"][:first]}
    out = []
    for l in manifest["layers"][first:last]:
        out += [v for v in l["inputs"] if v in before and v not in out]
    return out


def range_outputs(manifest: dict, first: int, last: int) -> set:
    """Values produced in [first, last) that a later layer reads or that are model outputs."""
    later = {i for l in manifest["layers"][last:] for i in l["inputs"]}
    later |= {o["name"] for o in manifest["outputs"]}
    return {l["name"] for l in manifest["layers"][first:last] if l["name"] in later}


def case_split(ember: str, work: str) -> None:
    """For every k: run [0, k) on the model inputs, then [k, n) on what it handed over (its output
    file itself whenever that holds exactly what [k, n) reads; otherwise the subset [k, n) reads plus
    the model inputs it still needs), and compare the model outputs, wherever produced, with torch."""
    d = new_model(ember, work, "bert-base", True, 11)
    manifest = et.read_manifest(d)
    module, _, _, _ = et.load_ember_model(d, "bert-base", True)
    n = len(manifest["layers"])
    inputs = et.random_inputs("bert-base", True, batch=2, seq_len=8, seed=11)
    ref = dict(zip([o["name"] for o in manifest["outputs"]], et.torch_forward(module, inputs)))
    whole = et.ember_run(ember, d, inputs, work, tag="whole", threads=THREADS)
    worst, direct, identical = 0.0, 0, 0

    def run_range(k0: int, k1: int, path: str, out: str) -> "dict":
        ember_cmd(ember, "run", d, "--input", path, "--output", out, "--layers", f"{k0}:{k1}", "--repeat", "0",
                  "--device", "sim", "--threads", str(THREADS))
        return et.read_safetensors(out)

    for k in range(1, n):
        first_in = os.path.join(work, f"first-in-{k}.safetensors")
        et.write_safetensors(first_in, [(name, inputs[name]) for name in range_inputs(manifest, 0, k)])
        first_out = os.path.join(work, f"first-{k}.safetensors")
        handed = run_range(0, k, first_in, first_out)
        check(set(handed) == range_outputs(manifest, 0, k),
              f"k={k}: [0, {k}) wrote {sorted(handed)}, expected {sorted(range_outputs(manifest, 0, k))}")
        needed = range_inputs(manifest, k, n)
        if list(handed) and set(needed) == set(handed):
            second_in = first_out  # the first run's output file is the second run's input file
            direct += 1
        else:
            available = dict(inputs)
            available.update(handed)
            second_in = os.path.join(work, f"second-in-{k}.safetensors")
            et.write_safetensors(second_in, [(name, available[name]) for name in needed])
        result = dict(handed)
        result.update(run_range(k, n, second_in, os.path.join(work, f"second-{k}.safetensors")))
        ratios = []
        identical += all(np.array_equal(result.get(name), whole[name]) for name in ref)
        for name, want in ref.items():
            check(name in result, f"k={k}: output '{name}' was produced by neither run")
            r = et.error_ratio(result[name], want)
            check(r < TOLERANCE, f"k={k}: output '{name}' differs from PyTorch: ratio {r:.3e}")
            ratios.append(f"{name} {r:.2e}")
            worst = max(worst, r)
        print(f"  split [0,{k:2d}) + [{k:2d},{n}): handed over {len(handed)} value(s)"
              f"{' (file passed on as is)' if second_in == first_out else ''}; " + ", ".join(ratios))
    print(f"  worst ratio over {n - 1} splits: {worst:.3e}; {direct} of them chained the output file directly; "
          f"{identical} of {n - 1} bit-identical to the unsplit ember run")


# ---------------------------------------------------------------------------------------------

CASES = {
    "tiny_mlp": case_tiny("mlp", 1),
    "tiny_resnet50": case_tiny("resnet50", 2),
    "tiny_bert": case_tiny("bert-base", 3),
    "tiny_gpt2": case_tiny("gpt2", 4),
    "full_mlp": case_full("mlp", 2, 5),
    "full_resnet50": case_full("resnet50", 1, 6),
    "full_bert": case_full("bert-base", 1, 7),
    "full_gpt2": case_full("gpt2", 1, 8),
    "import_mlp": case_import("mlp", 21),
    "import_resnet50": case_import("resnet50", 22),
    "import_bert": case_import("bert-base", 23),
    "import_gpt2": case_import("gpt2", 24),
    "import_torchvision": case_import_torchvision,
    "split_bert": case_split,
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ember", help="path of the ember binary")
    p.add_argument("--list", action="store_true", help="print the cases")
    p.add_argument("case", nargs="?", choices=sorted(CASES))
    args = p.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    if not args.case or not args.ember:
        p.error("--ember and CASE are required")
    if not os.access(args.ember, os.X_OK):
        print(f"FAIL: --ember {args.ember} is not executable")
        return 1
    print(f"{args.case}: torch {torch.__version__}, torchvision {torchvision.__version__}, {THREADS} thread(s)")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"ember-ref-{args.case}-") as work:
        try:
            CASES[args.case](args.ember, work)
        except (Failure, et.EmberTorchError) as e:
            print(f"FAIL {args.case} after {time.monotonic() - t0:.1f} s: {e}")
            return 1
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            print(f"FAIL {args.case}: unexpected exception")
            return 1
    print(f"PASS {args.case} in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
