#!/usr/bin/python3
"""Workflows (DAGs of models, <repository>/<name>/workflow.json) served by `ember serve` over HTTP:
a fan-out and fan-in workflow answers exactly what its steps give when run by hand, one model at a
time, through the same server; its metadata is typed from its models; readiness follows its models;
every kind of bad workflow, request and failing step gets a clear 4xx while the server keeps serving;
and the metrics count requests, steps and the bytes handed between steps: through the gateway while
the models are cold, on the device once the node holds them all.

Usage: workflow_api_test.py --ember PATH
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from http_api_test import Api
from ports import free_port
from procs import Failure, print_tail, stop, wait_for


def spec(name, width):
    return {"name": name, "dtype": "float32", "shape": [-1, width]}


def write_model(folder, manifest, tensors=()):
    """A model version written by hand: model.json and a safetensors file of FP32 `tensors`
    ((name, shape, values), ...)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(dict(manifest, format="ember-model", format_version=1), f)
    header, blob = {}, b""
    for name, shape, values in tensors:
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(folder, "weights.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


def make_repository(ember, repo):
    """mlp and mlpb (16 -> 4, output fc3), widen (4 -> 16, output fc), sum2 (a + b, output sum), and
    the workflow 'traffic': detect (mlp) -> up (widen) -> left (mlpb) and right (mlp) -> join (sum2),
    answering join's sum as 'label' and detect's output as 'features'."""
    for name, seed in (("mlp", "5"), ("mlpb", "9")):
        subprocess.run([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", seed, "--name", name, "--out",
                        os.path.join(repo, name, "1")], check=True, capture_output=True)
    write_model(os.path.join(repo, "widen", "1"),
                {"name": "widen", "inputs": [spec("input", 4)], "outputs": [spec("fc", 16)],
                 "layers": [{"name": "fc", "op": "linear", "inputs": ["input"],
                             "attrs": {"bias": True, "in_features": 4, "out_features": 16},
                             "weights": {"weight": "fc.weight", "bias": "fc.bias"}}]},
                [("fc.weight", [16, 4], [((i * 7) % 11 - 5) / 8.0 for i in range(64)]),
                 ("fc.bias", [16], [i / 16.0 for i in range(16)])])
    write_model(os.path.join(repo, "sum2", "1"),
                {"name": "sum2", "inputs": [spec("a", 4), spec("b", 4)], "outputs": [spec("sum", 4)],
                 "layers": [{"name": "sum", "op": "add", "inputs": ["a", "b"]}]})
    workflows = {
        "traffic": {
            "inputs": ["x"],
            "steps": [
                {"name": "join", "model": "sum2", "inputs": {"a": "left.fc3", "b": "right.fc3"}},
                {"name": "detect", "model": "mlp", "inputs": {"input": "x"}},
                {"name": "up", "model": "widen", "inputs": {"input": "detect.fc3"}},
                {"name": "left", "model": "mlpb", "version": 1, "inputs": {"input": "up.fc"}},
                {"name": "right", "model": "mlp", "inputs": {"input": "up.fc"}},
            ],
            "outputs": {"label": "join.sum", "features": "detect.fc3"},
        },
        # Wired wrong: mlp's [n, 4] output into mlp's [n, 16] input; the second step fails.
        "misfit": {"inputs": ["x"],
                   "steps": [{"name": "first", "model": "mlp", "inputs": {"input": "x"}},
                             {"name": "second", "model": "mlp", "inputs": {"input": "first.fc3"}}],
                   "outputs": {"y": "second.fc3"}},
        "ghost": {"inputs": ["x"], "steps": [{"name": "only", "model": "nowhere", "inputs": {"input": "x"}}],
                  "outputs": {"y": "only.out"}},
    }
    for name, body in workflows.items():
        os.makedirs(os.path.join(repo, name))
        with open(os.path.join(repo, name, "workflow.json"), "w") as f:
            json.dump(body, f)
    os.makedirs(os.path.join(repo, "cyclic"))
    with open(os.path.join(repo, "cyclic", "workflow.json"), "w") as f:
        json.dump({"inputs": ["x"], "steps": [{"name": "a", "model": "mlp", "inputs": {"input": "b.fc3"}},
                                              {"name": "b", "model": "mlp", "inputs": {"input": "a.fc3"}}],
                   "outputs": {"y": "a.fc3"}}, f)


def tensor(name, rows, width, values):
    return {"name": name, "datatype": "FP32", "shape": [rows, width], "data": values}


def infer(api, model, inputs):
    """The outputs of one model run alone, by name."""
    text, _ = api.expect("POST", f"/v2/models/{model}/infer", 200, {"inputs": inputs})
    return {o["name"]: o for o in json.loads(text)["outputs"]}


def by_hand(api, x):
    """The traffic workflow's steps, one request each, the tensors going through this client."""
    detect = infer(api, "mlp", [tensor("input", 2, 16, x)])["fc3"]
    up = infer(api, "widen", [tensor("input", 2, 4, detect["data"])])["fc"]
    left = infer(api, "mlpb", [tensor("input", 2, 16, up["data"])])["fc3"]
    right = infer(api, "mlp", [tensor("input", 2, 16, up["data"])])["fc3"]
    join = infer(api, "sum2", [tensor("a", 2, 4, left["data"]), tensor("b", 2, 4, right["data"])])["sum"]
    return {"label": join, "features": detect}


def metric(text, name, **labels):
    """The value of the series `name` with `labels` in Prometheus text, or 0."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0


def run(ember):
    work = tempfile.mkdtemp(prefix="ember-workflow-")
    server = None
    log_path = os.path.join(work, "serve.log")
    try:
        repo = os.path.join(work, "repo")
        make_repository(ember, repo)
        port = free_port()
        with open(log_path, "w") as log:
            server = subprocess.Popen([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}",
                                       "--device-memory", "256MiB", "--cache", "256MiB", "--threads", "1"],
                                      stdout=log, stderr=subprocess.STDOUT)
        api = Api(port)
        wait_for("the server to be ready", lambda: api.call("GET", "/v2/health/ready")[0] == 200, 20)

        # Metadata: typed from the models the workflow's inputs feed and its outputs come from.
        meta = json.loads(api.expect("GET", "/v2/workflows/traffic", 200)[0])
        want = {"name": "traffic", "versions": ["1"], "platform": "ensemble",
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}],
                "outputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 4]},
                            {"name": "label", "datatype": "FP32", "shape": [-1, 4]}]}
        if meta != want:
            raise Failure(f"workflow metadata: {meta}, expected {want}")
        api.expect("GET", "/v2/workflows/traffic/ready", 400, error="has no ready replica")
        api.expect("GET", "/v2/workflows/nope", 404, error="unknown workflow 'nope'")

        # The answer equals the steps run by hand (the first request also loads every model).
        x = [0.125 * ((i * 5) % 13) - 0.75 for i in range(32)]
        request = {"id": "wf-1", "inputs": [tensor("x", 2, 16, x)]}
        reply = json.loads(api.expect("POST", "/v2/workflows/traffic/infer", 200, request)[0])
        if reply["model_name"] != "traffic" or reply["id"] != "wf-1":
            raise Failure(f"workflow reply: {reply}")
        got = {o["name"]: o for o in reply["outputs"]}
        want = by_hand(api, x)
        for name in ("label", "features"):
            if got[name]["data"] != want[name]["data"] or got[name]["shape"] != [2, 4]:
                raise Failure(f"workflow output {name}: {got[name]} differs from the steps run by hand {want[name]}")
        print("ok: the workflow's answer equals its five steps run by hand (fan-out and fan-in)")
        api.expect("GET", "/v2/workflows/traffic/ready", 200)

        # One output asked for; binary tensors in and out.
        request["outputs"] = [{"name": "label"}]
        reply = json.loads(api.expect("POST", "/v2/workflows/traffic/infer", 200, request)[0])
        if [o["name"] for o in reply["outputs"]] != ["label"]:
            raise Failure(f"asked for label only, got {reply['outputs']}")
        header = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 16],
                              "parameters": {"binary_data_size": 128}}],
                  "parameters": {"binary_data_output": True}}
        status, body, headers = api.binary("/v2/workflows/traffic/infer", json.dumps(header).encode(),
                                           struct.pack("<32f", *x))
        if status != 200:
            raise Failure(f"binary workflow request: HTTP {status} {body[:200]}")
        n = int(headers["inference-header-content-length"])
        offset, outputs = n, {}
        for o in json.loads(body[:n].decode())["outputs"]:
            size = o["parameters"]["binary_data_size"]
            outputs[o["name"]] = list(struct.unpack(f"<{size // 4}f", body[offset:offset + size]))
            offset += size
        if outputs["label"] != want["label"]["data"] or outputs["features"] != want["features"]["data"]:
            raise Failure(f"binary workflow answer {outputs} differs from JSON's")
        print("ok: binary tensors in and out give the same answer")

        # Bad requests and bad workflows: clear errors, nothing lost.
        api.expect("POST", "/v2/workflows/nope/infer", 404, request, error="unknown workflow 'nope'")
        api.expect("POST", "/v2/workflows/traffic/infer", 400, {"inputs": [tensor("y", 2, 16, x)]},
                   error="input 'y' is not one of workflow 'traffic''s (it takes: x)")
        api.expect("POST", "/v2/workflows/traffic/infer", 400,
                   {"inputs": [tensor("x", 2, 16, x)], "outputs": [{"name": "score"}]},
                   error="workflow 'traffic' has no output 'score' (it gives: features, label)")
        api.expect("POST", "/v2/workflows/traffic/infer", 400, {"inputs": [tensor("x", 2, 8, x[:16])]},
                   error="step 'detect' (model mlp)")
        api.expect("POST", "/v2/workflows/traffic/infer", 400, raw="{not json", error="not valid JSON")
        api.expect("POST", "/v2/workflows/misfit/infer", 400, {"inputs": [tensor("x", 1, 16, x[:16])]},
                   error="step 'second' (model mlp)")
        api.expect("POST", "/v2/workflows/ghost/infer", 400, {"inputs": [tensor("x", 1, 16, x[:16])]},
                   error="step 'only' names model nowhere, which the repository does not have")
        api.expect("GET", "/v2/workflows/ghost/ready", 400, error="which the repository does not have")
        api.expect("POST", "/v2/workflows/cyclic/infer", 400, {"inputs": [tensor("x", 1, 16, x[:16])]},
                   error="cyclic/workflow.json")
        meta = json.loads(api.expect("GET", "/v2/workflows/cyclic", 200)[0])
        if meta["inputs"] or meta["outputs"]:
            raise Failure(f"a workflow that does not parse has no signature: {meta}")

        # A workflow added to the repository is served after a rescan (the repository index).
        shutil.copytree(os.path.join(repo, "traffic"), os.path.join(repo, "traffic2"))
        api.expect("POST", "/v2/workflows/traffic2/infer", 404, request, error="unknown workflow 'traffic2'")
        api.expect("POST", "/v2/repository/index", 200)
        wait_for("traffic2 to be served",
                 lambda: api.call("POST", "/v2/workflows/traffic2/infer", request)[0] == 200, 10)
        print("ok: a workflow added to the repository is served after POST /v2/repository/index")

        # Still serving, and counted.
        text, _ = api.expect("POST", "/v2/workflows/traffic/infer", 200, request)
        metrics, _ = api.expect("GET", "/metrics", 200)
        checks = {
            "successes": metric(metrics, "ember_workflow_requests_total", workflow="traffic", outcome="success") >= 4,
            "bad requests": metric(metrics, "ember_workflow_requests_total", workflow="traffic",
                                   outcome="invalid_argument") >= 4,
            "step durations": metric(metrics, "ember_workflow_step_duration_seconds_count", node="gateway",
                                     workflow="traffic", step="join") == 1 and
            metric(metrics, "ember_workflow_step_duration_seconds_count", node="local", workflow="traffic",
                   step="join") == 3,
            # Per request: detect.fc3 to up (2x4 floats), up.fc to left and right (2x16 each), left
            # and right to join (2x4 each): 352 bytes. The first request found its models cold: the
            # gateway ran its steps, each answer coming back to it (host). The three after it ran on
            # the node holding every model, each step reading the last one's output on the device.
            "bytes handed through the gateway": metric(metrics, "ember_workflow_handoff_bytes_total",
                                                       workflow="traffic", path="host") == 352,
            "bytes handed on the device": metric(metrics, "ember_workflow_handoff_bytes_total", node="local",
                                                 workflow="traffic", path="same_device") == 3 * 352,
            "runs on the node": metric(metrics, "ember_node_workflow_runs_total", workflow="traffic",
                                       outcome="success") == 3,
        }
        if not all(checks.values()):
            raise Failure(f"workflow metrics: {checks}\n" +
                          "\n".join(line for line in metrics.splitlines() if "workflow" in line))
        print("ok: workflow metrics count requests, steps and hand-off bytes")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        print_tail(log_path, 30)
        return 1
    finally:
        stop(server)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    return run(parser.parse_args().ember)


if __name__ == "__main__":
    sys.exit(main())
