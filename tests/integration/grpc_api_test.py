#!/usr/bin/python3
"""KServe v2 over gRPC, end to end, with a client in Triton's layout: Python stubs generated at test
time from actors/gateway/grpc/grpc_service.proto (the same package, service, methods and field
numbers as Triton's grpc_service.proto).

Against `ember serve --grpc`: every RPC; raw and typed tensor contents; the same answer over HTTP
JSON, HTTP binary and gRPC; errors and their status codes (not found, invalid argument, deadline
exceeded, a message over gateway.max_body); a connection dropped mid-request; the standard health
service. Against a cluster (a manager, a node and a standalone gateway with --grpc): list, load,
query, infer and unload.

Usage: grpc_api_test.py --ember PATH
"""
import argparse
import functools
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

import procs
from ports import free_port
from procs import Failure

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "actors", "gateway", "grpc")


def stubs(work):
    """Generates the Python messages and stubs from the project's proto and imports them."""
    out = os.path.join(work, "stubs")
    os.makedirs(out)
    subprocess.run(["protoc", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", "-I", PROTO_DIR, "grpc_service.proto"],
                   check=True)
    sys.path.insert(0, out)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    return grpc_service_pb2, grpc_service_pb2_grpc


def health(channel, service=""):
    """grpc.health.v1.Health/Check by hand (python3-grpcio ships no health stubs): the request is
    field 1 (service name); the answer's field 1 is 1 for SERVING, 2 for NOT_SERVING."""
    check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    name = service.encode()
    reply = check(b"\x0a" + bytes([len(name)]) + name if name else b"", timeout=10)
    return {b"": 0, b"\x08\x01": 1, b"\x08\x02": 2}.get(reply, reply)


def http_call(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


# gRPC calls that fail while the server starts are "not yet" too.
wait_for = functools.partial(procs.wait_for, ignore=(OSError, grpc.RpcError))


class Client:
    def __init__(self, pb, rpc, port):
        self.pb = pb
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                             options=[("grpc.max_send_message_length", 256 << 20),
                                                      ("grpc.max_receive_message_length", 256 << 20)])
        self.stub = rpc.GRPCInferenceServiceStub(self.channel)

    def infer_request(self, model, arrays, typed=False, outputs=(), version="", rid=""):
        req = self.pb.ModelInferRequest(model_name=model, model_version=version, id=rid)
        for name, a in arrays:
            t = req.inputs.add()
            t.name = name
            t.datatype = {np.float32: "FP32", np.int64: "INT64", np.int32: "INT32", np.uint8: "UINT8"}[a.dtype.type]
            t.shape.extend(a.shape)
            if typed:
                field = {np.float32: "fp32_contents", np.int64: "int64_contents", np.int32: "int_contents",
                         np.uint8: "uint_contents"}[a.dtype.type]
                getattr(t.contents, field).extend(a.ravel().tolist())
            else:
                req.raw_input_contents.append(a.tobytes())
        for o in outputs:
            req.outputs.add().name = o
        return req

    def infer(self, *args, timeout=60, **kw):
        return self.stub.ModelInfer(self.infer_request(*args, **kw), timeout=timeout)

    def expect_error(self, what, call, code, text):
        try:
            call()
        except grpc.RpcError as e:
            if e.code() != code or text not in e.details():
                raise Failure(f"{what}: {e.code()} '{e.details()}', expected {code} with '{text}'")
            print(f"ok: {what} -> {e.code().name}: {e.details()[:110]}")
            return
        raise Failure(f"{what}: succeeded, expected {code}")


def outputs_of(reply):
    """name -> numpy array, from raw_output_contents or typed contents."""
    out = {}
    for i, o in enumerate(reply.outputs):
        dtype = {"FP32": np.float32, "INT64": np.int64, "INT32": np.int32, "UINT8": np.uint8}[o.datatype]
        if reply.raw_output_contents:
            a = np.frombuffer(reply.raw_output_contents[i], dtype=dtype)
        else:
            field = {"FP32": "fp32_contents", "INT64": "int64_contents", "INT32": "int_contents",
                     "UINT8": "uint_contents"}[o.datatype]
            a = np.array(getattr(o.contents, field), dtype=dtype)
        out[o.name] = a.reshape(list(o.shape))
    return out


def check_workflow(c, pb, hport, x, v1):
    """The workflow 'pair' (mlp versions 1 and 2 side by side) over gRPC: metadata as an ensemble,
    readiness, and the answer its models give alone, as over HTTP; errors with their codes."""
    meta = c.stub.ModelMetadata(pb.ModelMetadataRequest(name="pair"))
    if meta.platform != "ensemble" or [(t.name, list(t.shape)) for t in meta.inputs] != [("x", [-1, 16])] or \
            sorted(t.name for t in meta.outputs) != ["one", "two"]:
        raise Failure(f"workflow metadata: {meta}")
    if not c.stub.ModelReady(pb.ModelReadyRequest(name="pair")).ready:
        raise Failure("ModelReady(pair): its models are warm, yet not ready")
    reply = c.infer("pair", [("x", x)], rid="w-1")
    got = outputs_of(reply)
    v2 = outputs_of(c.infer("mlp", [("input", x)]))["fc3"]
    if reply.id != "w-1" or reply.model_name != "pair" or not np.array_equal(got["one"], outputs_of(v1)["fc3"]) \
            or not np.array_equal(got["two"], v2):
        raise Failure(f"workflow over gRPC: {reply.model_name} {got}")
    status, body, _ = http_call(hport, "POST", "/v2/workflows/pair/infer", json.dumps(
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}))
    answer = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in json.loads(body)["outputs"]}
    if status != 200 or any(not np.array_equal(answer[k], got[k]) for k in ("one", "two")):
        raise Failure(f"workflow over HTTP: {status} {body[:200]}")
    typed = outputs_of(c.infer("pair", [("x", x)], typed=True, outputs=["two"]))
    if list(typed) != ["two"] or not np.array_equal(typed["two"], v2):
        raise Failure(f"workflow, typed, one output: {typed}")
    c.expect_error("workflow input unknown", lambda: c.infer("pair", [("input", x)]), grpc.StatusCode.INVALID_ARGUMENT,
                   "input 'input' is not one of workflow 'pair''s")
    c.expect_error("workflow step fails", lambda: c.infer("pair", [("x", x[:, :8].copy())]), grpc.StatusCode.INVALID_ARGUMENT,
                   "step 'a' (model mlp version 1)")
    print("ok: a workflow over gRPC: ensemble metadata, ready, the answer of its models alone and of HTTP")


def check_serve(ember, pb, rpc, work, repo):
    hport, gport = free_port(), free_port()
    config = os.path.join(work, "small.yaml")
    with open(config, "w") as f:
        f.write("gateway:\n  max_body: 1MiB\n")
    log = open(os.path.join(work, "serve.log"), "w")
    server = subprocess.Popen([ember, "serve", "--config", config, "--repository", repo, "--http",
                               f"127.0.0.1:{hport}", "--grpc", f"127.0.0.1:{gport}", "--device-memory", "256MiB",
                               "--cache", "256MiB", "--threads", "1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        c = Client(pb, rpc, gport)
        wait_for("gRPC readiness", lambda: c.stub.ServerReady(pb.ServerReadyRequest(), timeout=2).ready, 20)
        OK = grpc.StatusCode
        # Server.
        if not c.stub.ServerLive(pb.ServerLiveRequest()).live:
            raise Failure("ServerLive: not live")
        meta = c.stub.ServerMetadata(pb.ServerMetadataRequest())
        if meta.name != "ember" or "model_repository" not in meta.extensions:
            raise Failure(f"ServerMetadata: {meta}")
        for service in ("", "inference.GRPCInferenceService"):
            if health(c.channel, service) != 1:
                raise Failure(f"health of '{service}': {health(c.channel, service)}, expected SERVING")
        c.expect_error("health of an unknown service", lambda: health(c.channel, "no.Such"), OK.NOT_FOUND,
                       "unknown service 'no.Such'")
        # Watch streams the status now (and at each change); an unknown service is SERVICE_UNKNOWN (3).
        watch = c.channel.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)
        for service, expected in (("", b"\x08\x01"), ("no.Such", b"\x08\x03")):
            name = service.encode()
            stream = watch(b"\x0a" + bytes([len(name)]) + name if name else b"", timeout=10)
            first = next(stream)
            stream.cancel()
            if first != expected:
                raise Failure(f"Watch of '{service}': first answer {first!r}, expected {expected!r}")
        # Each watch holds a server thread: the ninth at once is refused, and a freed place is taken again.
        time.sleep(0.5)  # the server notices a cancelled watch within 100 ms and frees its place
        held = [watch(b"", timeout=30) for _ in range(8)]
        for h in held:
            next(h)
        c.expect_error("a ninth health watch", lambda: next(watch(b"", timeout=10)), OK.RESOURCE_EXHAUSTED,
                       "at most 8 health watches at once")
        for h in held:
            h.cancel()
        wait_for("a watch after the others ended", lambda: next(watch(b"", timeout=10)) == b"\x08\x01", 10)
        print("ok: ServerLive, ServerReady, ServerMetadata, health SERVING (Check and Watch), unknown service")

        # Index, metadata, readiness before and after a load.
        index = {(m.name, m.version): m.state for m in c.stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        if index.get(("mlp", "2")) != "UNAVAILABLE" or ("mlp", "1") not in index or ("bert", "1") not in index:
            raise Failure(f"RepositoryIndex: {index}")
        md = c.stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"))
        if md.versions != ["1", "2"] or md.inputs[0].name != "input" or list(md.inputs[0].shape) != [-1, 16] \
                or md.inputs[0].datatype != "FP32" or md.outputs[0].name != "fc3":
            raise Failure(f"ModelMetadata: {md}")
        if c.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready:
            raise Failure("ModelReady: ready before any load")
        c.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"))
        if not c.stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="2")).ready:
            raise Failure("ModelReady: not ready after RepositoryModelLoad")
        ready = [m.name for m in c.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models]
        if ready != ["mlp"]:
            raise Failure(f"RepositoryIndex(ready=True): {ready}")
        print("ok: RepositoryIndex, ModelMetadata, ModelReady, RepositoryModelLoad")

        # The same answer over gRPC raw, gRPC typed, HTTP JSON and HTTP binary.
        x = np.linspace(-1, 1, 3 * 16, dtype=np.float32).reshape(3, 16)
        raw = c.infer("mlp", [("input", x)], rid="r-1")
        typed = c.infer("mlp", [("input", x)], typed=True)
        if raw.id != "r-1" or raw.model_name != "mlp" or raw.model_version != "2" or len(raw.raw_output_contents) != 1:
            raise Failure(f"raw reply: id {raw.id} model {raw.model_name}/{raw.model_version}")
        if typed.raw_output_contents or not typed.outputs[0].contents.fp32_contents:
            raise Failure("a typed request got no typed reply")
        a, b = outputs_of(raw)["fc3"], outputs_of(typed)["fc3"]
        status, body, _ = http_call(hport, "POST", "/v2/models/mlp/infer", json.dumps(
            {"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 16], "data": x.ravel().tolist()}]}))
        if status != 200:
            raise Failure(f"HTTP JSON: {status} {body[:200]}")
        j = np.array(json.loads(body)["outputs"][0]["data"], dtype=np.float32).reshape(3, 4)
        header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 16],
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "parameters": {"binary_data_output": True}}).encode()
        status, body, headers = http_call(hport, "POST", "/v2/models/mlp/infer", header + x.tobytes(),
                                          {"Inference-Header-Content-Length": str(len(header))})
        if status != 200:
            raise Failure(f"HTTP binary: {status} {body[:200]}")
        n = int(headers["inference-header-content-length"])
        h = np.frombuffer(body[n:], dtype=np.float32).reshape(3, 4)
        for name, other in (("gRPC typed", b), ("HTTP JSON", j), ("HTTP binary", h)):
            if a.shape != other.shape or not np.array_equal(a, other):
                raise Failure(f"gRPC raw and {name} differ: {a.ravel()[:4]} vs {other.ravel()[:4]}")
        print("ok: identical answers over gRPC raw, gRPC typed, HTTP JSON and HTTP binary")

        # Version 1 by name, and an explicit output.
        v1 = c.infer("mlp", [("input", x)], version="1", outputs=["fc3"])
        if v1.model_version != "1" or [o.name for o in v1.outputs] != ["fc3"]:
            raise Failure(f"version 1: {v1.model_version} {[o.name for o in v1.outputs]}")
        print("ok: model_version '1' and a requested output")

        # A workflow is served as a model named like it (as Triton serves ensembles).
        check_workflow(c, pb, hport, x, v1)

        # Errors and their status codes.
        good = np.zeros((1, 16), np.float32)
        c.expect_error("unknown model", lambda: c.infer("nope", [("input", good)]), OK.NOT_FOUND, "unknown model 'nope'")
        c.expect_error("unknown version", lambda: c.infer("mlp", [("input", good)], version="9"), OK.NOT_FOUND,
                       "unknown model")
        c.expect_error("bad version", lambda: c.infer("mlp", [("input", good)], version="v2"), OK.INVALID_ARGUMENT,
                       "model_version must be a version number")
        c.expect_error("no model name", lambda: c.infer("", [("input", good)]), OK.INVALID_ARGUMENT,
                       "model_name is empty")
        c.expect_error("no inputs", lambda: c.infer("mlp", []), OK.INVALID_ARGUMENT, "inputs is empty")
        c.expect_error("wrong width", lambda: c.infer("mlp", [("input", np.zeros((1, 15), np.float32))]),
                       OK.INVALID_ARGUMENT, "input")
        req = c.infer_request("mlp", [("input", good)])
        req.raw_input_contents[0] = req.raw_input_contents[0][:-4]
        c.expect_error("short raw contents", lambda: c.stub.ModelInfer(req), OK.INVALID_ARGUMENT, "datatype need 64")
        req = c.infer_request("mlp", [("input", good)])
        req.inputs[0].contents.fp32_contents.extend([1.0])
        c.expect_error("raw and typed at once", lambda: c.stub.ModelInfer(req), OK.INVALID_ARGUMENT, "both set")
        req = c.infer_request("mlp", [("input", good)], typed=True)
        req.inputs[0].datatype = "INT64"
        c.expect_error("typed data in the wrong field", lambda: c.stub.ModelInfer(req), OK.INVALID_ARGUMENT,
                       "goes in contents.int64_contents")
        req = c.infer_request("mlp", [("input", good)])
        req.inputs[0].datatype = "BOOL"
        c.expect_error("unsupported datatype", lambda: c.stub.ModelInfer(req), OK.INVALID_ARGUMENT, "'BOOL'")
        req = c.infer_request("mlp", [("input", good)])
        req.inputs[0].shape[0] = -1
        c.expect_error("negative dimension", lambda: c.stub.ModelInfer(req), OK.INVALID_ARGUMENT, "negative")
        c.expect_error("ModelMetadata of an unknown model",
                       lambda: c.stub.ModelMetadata(pb.ModelMetadataRequest(name="nope")), OK.NOT_FOUND, "nope")
        c.expect_error("ModelReady of an unknown model",
                       lambda: c.stub.ModelReady(pb.ModelReadyRequest(name="nope")), OK.NOT_FOUND, "nope")
        c.expect_error("load of a broken model",
                       lambda: c.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="broken")),
                       OK.INVALID_ARGUMENT, "broken")
        bad = pb.RepositoryModelLoadRequest(model_name="mlp")
        bad.parameters["config"].string_param = "{}"
        c.expect_error("an unknown load parameter", lambda: c.stub.RepositoryModelLoad(bad), OK.INVALID_ARGUMENT,
                       "unknown load parameter 'config'")
        big = np.zeros((20000, 16), np.float32)  # 1.28 MB of raw contents, over max_body (1 MiB)
        c.expect_error("a message over gateway.max_body", lambda: c.infer("mlp", [("input", big)]),
                       OK.RESOURCE_EXHAUSTED, "")
        c.expect_error("an unimplemented Triton method",
                       lambda: c.channel.unary_unary("/inference.GRPCInferenceService/ModelConfig")(b"", timeout=10),
                       OK.UNIMPLEMENTED, "")
        # A deadline shorter than a cold start: DEADLINE_EXCEEDED, and the server goes on.
        bert = [(t.name, np.zeros([8 if d < 0 else d for d in t.shape], {"INT64": np.int64, "FP32": np.float32}[
            t.datatype])) for t in c.stub.ModelMetadata(pb.ModelMetadataRequest(name="bert")).inputs]
        c.expect_error("a deadline shorter than the cold start", lambda: c.infer("bert", bert, timeout=0.001),
                       OK.DEADLINE_EXCEEDED, "")
        # A connection dropped mid-request (the cold start of bert): the server serves the next one.
        dropped = Client(pb, rpc, gport)
        future = dropped.stub.ModelInfer.future(dropped.infer_request("bert", bert), timeout=60)
        time.sleep(0.05)
        dropped.channel.close()
        try:
            future.result()
        except grpc.RpcError as e:
            print(f"ok: the dropped call ended {e.code().name}")
        warm = c.infer("bert", bert, timeout=60)
        if not warm.outputs:
            raise Failure("no answer after a dropped connection")
        print("ok: served after a connection dropped mid-request")

        # Unload: NOT ready, and inference says so.
        c.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"))
        if c.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready:
            raise Failure("ModelReady: ready after RepositoryModelUnload")
        c.expect_error("inference on an unloaded model", lambda: c.infer("mlp", [("input", good)]),
                       OK.INVALID_ARGUMENT, "unloaded")
        if server.poll() is not None:
            raise Failure("the server exited")
        print("ok: RepositoryModelUnload")
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def check_cluster(ember, pb, rpc, work, repo):
    mport, gport, hport = free_port(), free_port(), free_port()
    procs, logs = [], []

    def spawn(name, args):
        logs.append(open(os.path.join(work, name + ".log"), "w"))
        procs.append(subprocess.Popen([ember, *args], stdout=logs[-1], stderr=subprocess.STDOUT))

    try:
        spawn("manager", ["manager", "--listen", f"127.0.0.1:{mport}", "--repository", repo, "--node-timeout", "2s"])
        spawn("node", ["node", "--manager", f"127.0.0.1:{mport}", "--name", "n1", "--device-memory", "256MiB",
                       "--cache", "256MiB", "--threads", "1"])
        spawn("gateway", ["gateway", "--manager", f"127.0.0.1:{mport}", "--http", f"127.0.0.1:{hport}", "--grpc",
                          f"127.0.0.1:{gport}"])
        c = Client(pb, rpc, gport)
        wait_for("the standalone gateway's readiness",
                 lambda: c.stub.ServerReady(pb.ServerReadyRequest(), timeout=2).ready, 30)
        names = sorted({m.name for m in c.stub.RepositoryIndex(pb.RepositoryIndexRequest()).models})
        if names != ["bert", "broken", "mlp"]:
            raise Failure(f"cluster RepositoryIndex: {names}")
        load = pb.RepositoryModelLoadRequest(model_name="mlp")
        load.parameters["replicas"].int64_param = 1
        wait_for("a load the node accepts", lambda: c.stub.RepositoryModelLoad(load, timeout=10) is not None, 30)
        wait_for("mlp ready at the gateway", lambda: c.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, 10)
        x = np.ones((2, 16), np.float32)
        y = outputs_of(c.infer("mlp", [("input", x)]))["fc3"]
        if y.shape != (2, 4):
            raise Failure(f"cluster infer: shape {y.shape}")
        pair = outputs_of(c.infer("pair", [("x", x)]))  # mlp version 1 cold: the gateway runs the steps
        if not np.array_equal(pair["two"], y) or pair["one"].shape != (2, 4):
            raise Failure(f"cluster workflow: {pair}, expected two = {y}")
        again = outputs_of(c.infer("pair", [("x", x)]))  # both warm on n1: the node runs it
        if any(not np.array_equal(again[k], pair[k]) for k in ("one", "two")):
            raise Failure(f"cluster workflow run on the node: {again}, expected {pair}")
        status, body, _ = http_call(hport, "GET", "/metrics")
        if 'ember_node_workflow_runs_total{node="n1",workflow="pair",outcome="success"} 1' not in body.decode():
            raise Failure("the second workflow request did not run on the node: " +
                          "\n".join(line for line in body.decode().splitlines() if "workflow" in line))
        print("ok: a cluster's standalone gateway sends a workflow whose models are warm on one node to that node")
        c.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"))
        print("ok: a cluster's standalone gateway lists, loads, answers and unloads over gRPC")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        for f in logs:
            f.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ember-grpc-")
    pb, rpc = stubs(work)
    repo = os.path.join(work, "repo")
    for arch, where in (("mlp", "mlp/1"), ("mlp", "mlp/2"), ("bert-base", "bert/1")):
        subprocess.run([args.ember, "model", "new", "--arch", arch, "--tiny", "--seed", "5", "--out",
                        os.path.join(repo, where)], check=True, capture_output=True)
    os.makedirs(os.path.join(repo, "broken", "1"))
    with open(os.path.join(repo, "mlp", "1", "model.json")) as f:
        manifest = f.read()
    with open(os.path.join(repo, "broken", "1", "model.json"), "w") as f:
        f.write(manifest)
    with open(os.path.join(repo, "broken", "1", "weights.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    os.makedirs(os.path.join(repo, "pair"))
    with open(os.path.join(repo, "pair", "workflow.json"), "w") as f:
        json.dump({"inputs": ["x"], "steps": [{"name": "a", "model": "mlp", "version": 1, "inputs": {"input": "x"}},
                                              {"name": "b", "model": "mlp", "inputs": {"input": "x"}}],
                   "outputs": {"one": "a.fc3", "two": "b.fc3"}}, f)
    try:
        check_serve(args.ember, pb, rpc, work, repo)
        check_cluster(args.ember, pb, rpc, work, repo)
    except Failure as e:
        print(f"FAIL: {e} (logs in {work})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
