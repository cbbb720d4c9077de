#!/usr/bin/python3
"""End-to-end checks of the `ember` command line: what a user types, what comes back, and how bad
input is reported (exit status 2 and an "error: <file or option>: ..." line, never a crash).

Usage: cli_test.py --ember PATH CASE   (CASE: see CASES below; each is one CTest entry)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import ember_torch  # noqa: E402  (safetensors helpers only; torch is not needed here)
import numpy as np  # noqa: E402
import procs  # noqa: E402
from ports import free_port  # noqa: E402


class Failure(Exception):
    pass


def run(ember, *args, expect=0, timeout=120):
    p = subprocess.run([ember, "--log-level", "warn", *args], capture_output=True, text=True, timeout=timeout)
    if p.returncode != expect:
        raise Failure(f"ember {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                      f"stdout: {p.stdout}\nstderr: {p.stderr}")
    if p.returncode < 0:
        raise Failure(f"ember {' '.join(args)} crashed with signal {-p.returncode}")
    return p


def expect_error(ember, args, must_contain, code=2):
    p = run(ember, *args, expect=code)
    if "error: " not in p.stderr or must_contain not in p.stderr:
        raise Failure(f"ember {' '.join(args)}: stderr lacks '{must_contain}':\n{p.stderr}")
    print(f"ok: {' '.join(args[:2])} ... -> {p.stderr.strip()[:160]}")


def new_model(ember, work, arch):
    d = os.path.join(work, arch, "1")
    run(ember, "model", "new", "--arch", arch, "--tiny", "--seed", "3", "--out", d)
    return d


def case_inspect(ember, work):
    d = new_model(ember, work, "resnet50")
    text = run(ember, "model", "inspect", d).stdout
    for needle in ("model      resnet50-tiny", "file bytes [begin, end)", "layer1.0.conv1", "[1, 10]"):
        if needle not in text:
            raise Failure(f"inspect output lacks '{needle}'")
    table = json.loads(run(ember, "model", "inspect", d, "--json").stdout)
    end = table["data_offset"]
    for layer in table["layer_table"]:  # consecutive byte ranges, covering the file
        if table["data_offset"] + layer["data_offset"] != end:
            raise Failure(f"layer {layer['name']} does not start where the previous one ended")
        end += layer["bytes"]
    if end != table["file_bytes"]:
        raise Failure(f"layers end at {end}, the file at {table['file_bytes']}")
    print(f"ok: {len(table['layer_table'])} layers tile bytes {table['data_offset']}..{end}")


def case_json_io(ember, work):
    d = new_model(ember, work, "mlp")
    req = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 16], "data": [[0.5] * 16, [-0.25] * 16]}]}
    with open(os.path.join(work, "req.json"), "w") as f:
        json.dump(req, f)
    out = os.path.join(work, "resp.json")
    run(ember, "run", d, "--input", os.path.join(work, "req.json"), "--output", out, "--repeat", "0")
    resp = json.load(open(out))
    o = resp["outputs"][0]
    if resp["model_name"] != "mlp-tiny" or o["name"] != "fc3" or o["shape"] != [2, 4] or o["datatype"] != "FP32":
        raise Failure(f"unexpected response {resp}")
    if len(o["data"]) != 8 or o["data"][:4] == o["data"][4:]:
        raise Failure(f"rows should differ: {o['data']}")
    print("ok: KServe v2 request in, response out", o["data"][:4])


def case_layers(ember, work):
    d = new_model(ember, work, "bert-base")
    inputs = ember_torch.random_inputs("bert-base", True, batch=2, seq_len=6, seed=1)
    ember_torch.write_safetensors(os.path.join(work, "in.safetensors"), inputs.items())
    whole = os.path.join(work, "whole.safetensors")
    run(ember, "run", d, "--input", os.path.join(work, "in.safetensors"), "--output", whole, "--repeat", "0")
    mid, last = os.path.join(work, "mid.safetensors"), os.path.join(work, "last.safetensors")
    run(ember, "run", d, "--layers", "0:11", "--input", os.path.join(work, "in.safetensors"), "--output", mid, "--repeat", "0")
    # The second range reads only what the first hands on; the extra token types are ignored.
    merged = dict(ember_torch.read_safetensors(mid))
    merged.update(inputs)
    both = os.path.join(work, "both.safetensors")
    ember_torch.write_safetensors(both, merged.items())
    run(ember, "run", d, "--layers", "11:", "--input", both, "--output", last, "--repeat", "0")
    a, b = ember_torch.read_safetensors(whole), ember_torch.read_safetensors(last)
    for name in a:
        if not np.array_equal(a[name], b[name]):
            raise Failure(f"{name}: split run differs from the whole model")
    print("ok: --layers 0:11 then 11: equals the whole model bit for bit")


def case_bad_input(ember, work):
    d = new_model(ember, work, "gpt2")
    bad = os.path.join(work, "bad.json")
    with open(bad, "w") as f:
        f.write('{"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 3], "data": [1, 2]}]}')
    expect_error(ember, ["run", d, "--input", bad], "holds 2 values but shape [1, 3] needs 3")
    with open(bad, "w") as f:
        f.write('{"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 5000]}]}')
    expect_error(ember, ["run", d, "--input", bad], "outside the 100 rows of layer 'wte'")
    with open(bad, "w") as f:
        f.write('{"inputs": [{"name": "input_ids", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}')
    expect_error(ember, ["run", d, "--input", bad], "input 'input_ids' is float32[1, 3], expected int64[-1, -1]")
    with open(bad, "w") as f:
        f.write('{"inputs": [')
    expect_error(ember, ["run", d, "--input", bad], "bad.json: not valid JSON")
    with open(bad, "w") as f:
        f.write('{"input": []}')
    expect_error(ember, ["run", d, "--input", bad], "expected a KServe v2 request")
    with open(bad, "w") as f:
        f.write('{"inputs": ' + "[" * 100000 + "]" * 100000 + "}")
    expect_error(ember, ["run", d, "--input", bad], "nested deeper than 64 levels")
    expect_error(ember, ["run", d, "--seq-len", "64"], "exceeds the 32 positions")
    expect_error(ember, ["run", d, "--layers", "5:2"], "--layers '5:2'")
    expect_error(ember, ["run", d, "--input", os.path.join(work, "missing.safetensors")], "missing.safetensors")


def case_bad_model(ember, work):
    d = new_model(ember, work, "mlp")
    w = os.path.join(d, "weights.safetensors")
    data = open(w, "rb").read()
    open(w, "wb").write(data[:-64])
    expect_error(ember, ["run", d], "weights.safetensors: tensor 'fc3.bias': field 'data_offsets' ends at")
    expect_error(ember, ["model", "inspect", d], "weights.safetensors")
    open(w, "wb").write(b"\x05")
    expect_error(ember, ["run", d], "truncated")
    m = os.path.join(d, "model.json")
    manifest = json.load(open(m))
    manifest["layers"][1]["op"] = "swish"
    json.dump(manifest, open(m, "w"))
    expect_error(ember, ["model", "inspect", d], "layers[1] 'relu1': field 'op': unknown op 'swish'")
    expect_error(ember, ["run", os.path.join(work, "nowhere")], "model.json: no such file")


def case_devices(ember, work):
    d = new_model(ember, work, "resnet50")
    expect_error(ember, ["run", d, "--device-memory", "4MiB"], "out of device memory", code=1)
    expect_error(ember, ["run", d, "--device-memory", "lots"], "--device-memory: cannot read 'lots'")
    expect_error(ember, ["run", d, "--device", "tpu"], "unknown device kind 'tpu'")
    cfg = os.path.join(work, "node.yaml")
    with open(cfg, "w") as f:
        f.write("devices:\n  memroy: 1GiB\n")
    expect_error(ember, ["run", d, "--config", cfg], "node.yaml: devices.memroy: unknown key")
    listing = run(ember, "devices").stdout
    if "sim:0" not in listing and "cuda:0" not in listing:
        raise Failure(f"devices lists nothing: {listing}")
    if "cuda:0" not in listing:  # no GPU here: asking for CUDA must fail cleanly
        expect_error(ember, ["run", d, "--device", "cuda"], "devices.kind is cuda")


def case_workflow(ember, work):
    """`ember workflow run`: a fan-out of one input to two models (the newest version where none is
    named) answers what `ember run` of each model answers, exactly; bad workflows, inputs and
    repositories are errors naming what is wrong."""
    repo = os.path.join(work, "repo")
    for name, version, seed in (("left", 1, 1), ("right", 1, 2), ("right", 2, 3)):
        run(ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", str(seed), "--name", name,
            "--out", os.path.join(repo, name, str(version)))
    os.makedirs(os.path.join(repo, "pair"))
    wf = {"inputs": ["x"],
          "steps": [{"name": "a", "model": "left", "inputs": {"input": "x"}},
                    {"name": "b", "model": "right", "inputs": {"input": "x"}}],
          "outputs": {"ya": "a.fc3", "yb": "b.fc3"}}
    with open(os.path.join(repo, "pair", "workflow.json"), "w") as f:
        json.dump(wf, f)
    rows = [[0.1 * i - 0.7 for i in range(16)], [0.05 * i for i in range(16)]]
    for name, tensor in (("wf.json", "x"), ("model.json", "input")):
        with open(os.path.join(work, name), "w") as f:
            json.dump({"inputs": [{"name": tensor, "datatype": "FP32", "shape": [2, 16], "data": rows}]}, f)
    out = os.path.join(work, "answer.json")
    printed = run(ember, "workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "wf.json"),
                  "--output", out, "--device", "sim")
    if "device hand-off: 0 bytes between steps on sim:0, none through the host" not in printed.stdout:
        raise Failure(f"the device hand-off's summary is missing: {printed.stdout}")
    answer = {o["name"]: o["data"] for o in json.load(open(out))["outputs"]}
    by_host = os.path.join(work, "answer-host.json")
    run(ember, "workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "wf.json"),
        "--output", by_host, "--device", "sim", "--handoff", "host")
    if {o["name"]: o["data"] for o in json.load(open(by_host))["outputs"]} != answer:
        raise Failure("the host hand-off answers differently from the device hand-off")
    for output, model in (("ya", "left/1"), ("yb", "right/2")):
        alone = os.path.join(work, f"alone-{output}.json")
        run(ember, "run", os.path.join(repo, model), "--input", os.path.join(work, "model.json"), "--output", alone,
            "--repeat", "0", "--device", "sim")
        if json.load(open(alone))["outputs"][0]["data"] != answer[output]:
            raise Failure(f"workflow output {output} differs from {model} run alone")
    print("ok: the workflow's answers equal its models run by hand (newest version taken)")

    expect_error(ember, ["workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "model.json")],
                 "input 'input' is not one of workflow 'pair''s (it takes: x)")
    expect_error(ember, ["workflow", "run", os.path.join(repo, "none"), "--input", os.path.join(work, "wf.json")],
                 "workflow.json: cannot open")
    wf["steps"][1]["model"] = "missing"
    with open(os.path.join(repo, "pair", "workflow.json"), "w") as f:
        json.dump(wf, f)
    expect_error(ember, ["workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "wf.json")],
                 "step 'b': model 'missing' is not in the repository")
    wf["steps"][1]["model"] = "right"
    wf["outputs"]["yb"] = "b.nothing"
    with open(os.path.join(repo, "pair", "workflow.json"), "w") as f:
        json.dump(wf, f)
    expect_error(ember, ["workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "wf.json")],
                 "step 'b' (model right): the model gives no output 'nothing' (it gives: fc3)")
    with open(os.path.join(repo, "pair", "workflow.json"), "w") as f:
        f.write('{"inputs": ["x"], "steps": []}')
    expect_error(ember, ["workflow", "run", os.path.join(repo, "pair"), "--input", os.path.join(work, "wf.json")],
                 "pair/workflow.json")


def case_infer_image(ember, work):
    """`ember infer --image --decode top`: a gray PGM and an RGB PPM sent to a served model answer
    what `ember run` answers on the tensor numpy makes of the same pixels (PGM/PPM read, gray
    replicated, (pixel/255 - mean)/std per channel), and the top classes printed are that answer's;
    bad pictures, labels and decodings are errors naming what is wrong. (The resize is checked
    against PyTorch's values in tests/cli/image_input_test.cpp.)"""
    repo = os.path.join(work, "repo")
    d = os.path.join(repo, "tiny", "1")
    run(ember, "model", "new", "--arch", "resnet50", "--tiny", "--seed", "3", "--name", "tiny", "--out", d)  # [N,3,32,32] -> [N,10]
    rng = np.random.default_rng(7)
    gray = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    rgb = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    pgm, ppm = os.path.join(work, "gray.pgm"), os.path.join(work, "rgb.ppm")
    open(pgm, "wb").write(b"P5\n# a comment\n32 32\n255\n" + gray.tobytes())
    open(ppm, "wb").write(b"P6 32 32 255\n" + rgb.tobytes())
    labels = os.path.join(work, "labels.txt")
    open(labels, "w").write("".join(f"class {i}\n" for i in range(10)))
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    cases = [(pgm, [], np.repeat(((gray / 255.0 - 0.5) / 0.5)[None], 3, 0)),
             (ppm, ["--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225"],
              ((rgb.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1))]
    want = []
    for i, (_, _, x) in enumerate(cases):
        req = os.path.join(work, f"req{i}.json")
        json.dump({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 3, 32, 32],
                               "data": x.astype(np.float32).ravel().tolist()}]}, open(req, "w"))
        out = os.path.join(work, f"run{i}.json")
        run(ember, "run", d, "--input", req, "--output", out, "--repeat", "0", "--device", "sim")
        want.append(np.array(json.load(open(out))["outputs"][0]["data"], np.float64))

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = os.path.join(work, "serve.log")
    log = open(log_path, "w")
    server = subprocess.Popen([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}", "--device", "sim"],
                              stdout=log, stderr=subprocess.STDOUT)
    ok = False
    try:
        import urllib.request
        procs.wait_for("ember serve", lambda: urllib.request.urlopen(url + "/v2/health/ready", timeout=2).status == 200,
                       60)
        for i, (image, extra, _) in enumerate(cases):
            resp = os.path.join(work, f"resp{i}.json")
            p = run(ember, "infer", "--url", url, "--model", "tiny", "--image", image, *extra, "--output", resp,
                    "--decode", "top", "--top", "3", "--labels", labels)
            got = np.array(json.load(open(resp))["outputs"][0]["data"], np.float64)
            err = float(np.max(np.abs(got - want[i])) / np.max(np.abs(want[i])))
            if not err <= 1e-5:
                raise Failure(f"{os.path.basename(image)}: served answer differs from `ember run`'s by {err:.2e}")
            top = [int(c) for c in np.argsort(-want[i], kind="stable")[:3]]
            line = "top[0]: " + " ".join(f'"class {c}" {want[i][c]:.4g} (class {c});' for c in top)
            if line not in p.stdout:
                raise Failure(f"{os.path.basename(image)}: expected '{line}' in:\n{p.stdout}")
            print(f"ok: {os.path.basename(image)} -> {line} (max rel err {err:.1e})")

        base = ["infer", "--url", url, "--model", "tiny"]
        bad = os.path.join(work, "bad.pgm")
        open(bad, "wb").write(b"P5 32 32 255\n" + gray.tobytes()[:-1])
        expect_error(ember, base + ["--image", bad], "bad.pgm: truncated: a 32x32 gray raster is 1024 bytes, the file holds 1023")
        open(bad, "wb").write(b"P5 32 32 65535\n" + gray.tobytes() * 2)
        expect_error(ember, base + ["--image", bad], "bad.pgm: maxval 65535: only 8-bit samples")
        open(bad, "wb").write(b"\x89PNG\r\n\x1a\n")
        expect_error(ember, base + ["--image", bad], "bad.pgm: not a binary PGM (P5) or PPM (P6) file")
        expect_error(ember, base + ["--image", os.path.join(work, "missing.pgm")], "missing.pgm: cannot open")
        expect_error(ember, base + ["--image", ppm, "--mean", "0.5,0.5"],
                     "--image " + ppm + " for 'tiny': mean has 2 values; give 1 or one per channel (3)")
        short = os.path.join(work, "short.txt")
        open(short, "w").write("".join(f"class {i}\n" for i in range(9)))
        expect_error(ember, base + ["--image", pgm, "--decode", "top", "--labels", short],
                     "9 labels for an output of 10 classes: expected 10")
        expect_error(ember, base + ["--image", pgm, "--decode", "ctc", "--labels", labels],
                     "--decode ctc of output 'fc' with --labels " + labels + ": ctc decoding needs an output [N, T, C]; this one is [1, 10]")
        expect_error(ember, base + ["--image", pgm, "--decode", "ctc"], "--decode ctc: ctc decoding needs labels")
        expect_error(ember, base + ["--image", pgm, "--decode", "top", "--labels", os.path.join(work, "nowhere.txt")],
                     "nowhere.txt: cannot open")
        ok = True
    finally:
        procs.stop(server)
        log.close()
        if not ok:
            procs.print_tail(log_path, 30)


def case_sim(ember, work):
    """`ember sim`: a small trace on a small simulated cluster (chains, the autoscaler scaling up and
    to zero, random placement), run twice: the same bytes out; every request answered after it
    arrived or counted lost; the outputs parse; Flashpoint's example files run; bad input refused."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    profile = os.path.abspath(os.path.join(root, "deploy", "sim", "profiles", "bert-base.json"))
    cluster = os.path.join(work, "cluster.yaml")
    open(cluster, "w").write(
        "topology:\n  hosts: 6\n  gpus_per_host: 2\n  hosts_per_leaf: 3\n  host_link: 1Gbit/s\n"
        "  spine_link: 2Gbit/s\n  cloud_link: 1Gbit/s\n  device_memory: 2GB\n"
        "sim:\n  slo: 200ms\n  cold_start_timeout: 60s\n"
        "autoscale:\n  interval: 250ms\n  look_back: 2s\n  upscale_delay: 250ms\n  downscale_delay: 1s\n"
        "  idle_timeout: 3s\n  max_replicas: 4\n  placement: random\n")
    models = os.path.join(work, "models.yaml")
    open(models, "w").write(f"models:\n  - name: small\n    profile: {profile}\n    weights: 50MB\n    speedup: 10\n"
                            f"  - name: big\n    profile: {profile}\n    weights: 300MB\n    speedup: 10\n"
                            f"    slo: 1s\n")
    rng = np.random.default_rng(5)
    times = []
    for burst in range(6):  # bursts of each model in turn, idle gaps between
        name = "small" if burst % 2 == 0 else "big"
        times += [(burst * 6 + t, name) for t in np.sort(rng.uniform(0, 2, 80))]
    trace = os.path.join(work, "trace.csv")
    with open(trace, "w") as f:
        f.write("time_s,model\n")
        for t, m in sorted(times):
            f.write(f"{t:.6f},{m}\n")
    outs = []
    for i in range(2):
        out = os.path.join(work, f"out{i}")
        p = run(ember, "sim", "--cluster", cluster, "--models", models, "--trace", trace, "--out", out, "--seed", "3",
                "--window", "0:10")
        outs.append(out)
        if "| arm | requests | lost |" not in p.stdout or "events/s" not in p.stdout:
            raise Failure(f"ember sim printed no table:\n{p.stdout}")
    for name in ("requests.csv", "trace.json", "plot.svg", "summary.json"):
        a, b = (open(os.path.join(o, name), "rb").read() for o in outs)
        if a != b or not a:
            raise Failure(f"two runs with the same seed wrote different {name}")
    rows = [line.split(",") for line in open(os.path.join(outs[0], "requests.csv")).read().strip().split("\n")[1:]]
    if len(rows) != len(times):
        raise Failure(f"{len(rows)} request rows for {len(times)} requests")
    lost = 0
    for r in rows:
        if r[4] == "1":
            lost += 1
            continue
        if not float(r[0]) <= float(r[5]) < float(r[6]) or not r[2].startswith("host"):
            raise Failure(f"request answered before it arrived: {r}")
    summary = json.load(open(os.path.join(outs[0], "summary.json")))
    if summary["requests"] != len(times) or summary["lost"] != lost or lost != 0:
        raise Failure(f"summary {summary} against {len(times)} requests, {lost} lost")
    if summary["chains"] < 1 or summary["max_replicas"] < 2:
        raise Failure(f"expected the bursts to scale up along chains: {summary}")
    chrome = json.load(open(os.path.join(outs[0], "trace.json")))
    # A request is in the window when it arrived before its end (it may start or end after it).
    arrivals = [e["ts"] - 1000 * e["args"]["waited_ms"] for e in chrome["traceEvents"]
                if e["ph"] == "X" and e["cat"] == "request"]
    if not arrivals or max(arrivals) >= 10e6 or len(arrivals) >= len(times):
        raise Failure(f"the Chrome trace's window 0:10 is not kept ({len(arrivals)} requests)")
    if not open(os.path.join(outs[0], "plot.svg")).read().startswith("<svg"):
        raise Failure("plot.svg is not an SVG")
    print(f"ok: {len(times)} requests, {summary['chains']} chains, at most {summary['max_replicas']} replicas, "
          f"the same bytes twice")
    # Flashpoint's example files: a few requests of its smallest model on the 1,600 GPUs.
    small_trace = os.path.join(work, "codebert.csv")
    open(small_trace, "w").write("time_s,model\n" + "".join(f"{i * 0.1:.1f},codebert\n" for i in range(30)))
    run(ember, "sim", "--cluster", os.path.join(root, "deploy", "sim", "flashpoint.yaml"), "--models",
        os.path.join(root, "deploy", "sim", "flashpoint-models.yaml"), "--trace", small_trace, "--out",
        os.path.join(work, "fp"))
    base = ["sim", "--cluster", cluster, "--models", models, "--out", os.path.join(work, "bad")]
    bad_cluster = os.path.join(work, "bad.yaml")
    open(bad_cluster, "w").write("topology:\n  hostz: 3\n")
    expect_error(ember, ["sim", "--cluster", bad_cluster, "--models", models, "--trace", trace], "bad.yaml: topology.hostz: unknown key")
    other = os.path.join(work, "other.csv")
    open(other, "w").write("time_s,model\n0,nobody\n")
    expect_error(ember, base + ["--trace", other], "the trace asks for model 'nobody', which the cluster lacks")
    missing = os.path.join(work, "missing.yaml")
    open(missing, "w").write("models:\n  - name: small\n    profile: nowhere.json\n")
    expect_error(ember, ["sim", "--cluster", cluster, "--models", missing, "--trace", trace], "nowhere.json")
    expect_error(ember, base + ["--trace", trace, "--set", "autoscale.policy"], "expected section.key=value")
    expect_error(ember, base + ["--trace", trace, "--policy", "sometimes"], "autoscale.policy")
    expect_error(ember, base + ["--trace", trace, "--window", "5:1"], "--window 5:1")
    expect_error(ember, base + ["--trace", os.path.join(work, "no-trace.csv")], "no-trace.csv")


CASES = {"inspect": case_inspect, "json_io": case_json_io, "layers": case_layers, "bad_input": case_bad_input,
         "bad_model": case_bad_model, "devices": case_devices, "workflow": case_workflow,
         "infer_image": case_infer_image, "sim": case_sim}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ember-cli-")
    try:
        CASES[args.case](args.ember, work)
    except (Failure, procs.Failure) as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
