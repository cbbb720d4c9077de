#!/usr/bin/python3
"""PyTorch side of bench/executor_bench: loads an Ember model directory into the reference PyTorch
module (tools/ember_torch.py) and times forward passes on request, so that Ember and PyTorch run
alternately in one benchmark run on the same weights, inputs and thread count.

Protocol: one JSON object per line on stdin, one JSON reply per line on stdout.
  {"op": "hello", "threads": T, "device": "sim"|"cuda"}
                                                  -> {"ok": true, "torch": ..., "blas": ..., "threads": T}
      "cuda" runs the module and inputs on GPU 0, each pass timed after torch.cuda.synchronize()
  {"op": "load", "dir": D}                        -> {"ok": true, "arch": ..., "tiny": ...}
  {"op": "time", "inputs": F, "reps": N, "output": O}
      runs N timed forward passes on the inputs in safetensors file F; writes the last outputs to O
      (named after the manifest's outputs)        -> {"ok": true, "ms": [...]}
Errors reply {"ok": false, "error": "..."}.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import ember_torch  # noqa: E402


def blas_in_use():
    """The BLAS shared objects this process has mapped, and torch's own build summary line."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path) or "lapack" in os.path.basename(path):
                libs.add(os.path.realpath(path))
    config = [l.strip() for l in ember_torch.torch.__config__.show().splitlines() if "BLAS" in l]
    return {"mapped": sorted(libs), "build": config}


def main():
    torch = ember_torch.torch
    state = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "hello":
                torch.set_num_threads(int(req["threads"]))
                torch.set_num_interop_threads(1)
                state["device"] = "cuda" if req.get("device") == "cuda" else "cpu"
                if state["device"] == "cuda":
                    # Ember's kernels compute in full fp32; so must PyTorch's, or the comparison is off.
                    torch.backends.cuda.matmul.allow_tf32 = False
                    torch.backends.cudnn.allow_tf32 = False
                reply = {"torch": torch.__version__, "threads": torch.get_num_threads(), "blas": blas_in_use()}
                if state["device"] == "cuda":
                    reply["blas"]["mapped"] = [torch.cuda.get_device_name(0)]
            elif req["op"] == "load":
                module, arch, tiny, _ = ember_torch.load_ember_model(req["dir"])
                module = module.to(state.get("device", "cpu"))
                state.update(module=module, manifest=ember_torch.read_manifest(req["dir"]))
                reply = {"arch": arch, "tiny": tiny}
            elif req["op"] == "time":
                inputs = ember_torch.read_safetensors(req["inputs"])
                order = [i["name"] for i in state["manifest"]["inputs"]]
                dev = state.get("device", "cpu")
                args = [torch.from_numpy(inputs[n].copy()).to(dev) for n in order]
                sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
                times = []
                with torch.inference_mode():
                    for _ in range(int(req["reps"])):
                        sync()
                        t0 = time.perf_counter()
                        out = state["module"](*args)
                        sync()
                        times.append((time.perf_counter() - t0) * 1e3)
                if not isinstance(out, (tuple, list)):
                    out = (out,)
                names = [o["name"] for o in state["manifest"]["outputs"]]
                ember_torch.write_safetensors(req["output"], [(n, o.cpu().numpy()) for n, o in zip(names, out)])
                reply = {"ms": times}
            else:
                raise ValueError("unknown op " + req["op"])
            reply["ok"] = True
        except Exception as e:  # reported to the benchmark, which prints it
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
