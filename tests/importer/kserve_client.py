"""The KServe v2 client the served-model tests share: one request over HTTP (binary tensors or JSON)
or gRPC (raw contents) with float32 and int64 inputs, answered by the model's first output as a
float32 array. A reply other than 200 (HTTP) raises procs.Failure; a gRPC error raises grpc.RpcError.
serving() runs the `ember serve` they ask. Imports procs and ports from tests/integration (on the
caller's sys.path).

Needs numpy, and for grpc_stubs protoc with grpc_python_plugin (Debian's protobuf-compiler-grpc).
"""

import contextlib
import http.client
import json
import os
import subprocess
import sys

import numpy as np

import procs
from ports import free_port
from procs import Failure

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATATYPES = {np.float32: "FP32", np.int64: "INT64"}


def http_binary(port, model, arrays, names):
    """KServe v2 binary tensors: JSON header, then each input's bytes; the outputs binary too."""
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    data = b""
    for n, a in zip(names, arrays):
        header["inputs"].append({"name": n, "datatype": DATATYPES[a.dtype.type], "shape": list(a.shape),
                                 "parameters": {"binary_data_size": a.nbytes}})
        data += a.tobytes()
    body = json.dumps(header).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", f"/v2/models/{model}/infer", body=body + data,
                     headers={"Content-Type": "application/octet-stream",
                              "Inference-Header-Content-Length": str(len(body))})
        r = conn.getresponse()
        reply = r.read()
        if r.status != 200:
            raise Failure(f"{model} over HTTP: {r.status} {reply[:300]}")
        n = int(r.getheader("Inference-Header-Content-Length"))
        out = json.loads(reply[:n])["outputs"][0]
        return np.frombuffer(reply[n:n + out["parameters"]["binary_data_size"]], dtype=np.float32).reshape(out["shape"])
    finally:
        conn.close()


def http_json(port, model, arrays, names):
    req = {"inputs": [{"name": n, "datatype": DATATYPES[a.dtype.type], "shape": list(a.shape),
                       "data": a.ravel().tolist()} for n, a in zip(names, arrays)]}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", f"/v2/models/{model}/infer", body=json.dumps(req), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise Failure(f"{model} over HTTP JSON: {r.status} {body[:300]}")
        out = json.loads(body)["outputs"][0]
        return np.array(out["data"], dtype=np.float32).reshape(out["shape"])
    finally:
        conn.close()


def grpc_stubs(work):
    """Generates the KServe v2 gRPC stubs from the repository's .proto into work/stubs; returns
    (grpc_service_pb2, grpc_service_pb2_grpc)."""
    out = os.path.join(work, "stubs")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", "-I",
                    os.path.join(REPO, "actors", "gateway", "grpc"), "grpc_service.proto"], check=True)
    sys.path.insert(0, out)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    return grpc_service_pb2, grpc_service_pb2_grpc


def grpc_infer(stub, pb, model, arrays, names):
    req = pb.ModelInferRequest(model_name=model)
    for n, a in zip(names, arrays):
        t = req.inputs.add()
        t.name = n
        t.datatype = DATATYPES[a.dtype.type]
        t.shape.extend(a.shape)
        req.raw_input_contents.append(a.tobytes())
    reply = stub.ModelInfer(req, timeout=300)
    return np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).reshape(list(reply.outputs[0].shape))


@contextlib.contextmanager
def serving(ember, repo, work, memory, threads):
    """One `ember serve` on `repo`, HTTP and gRPC on free loopback ports, `memory` (e.g. "1GiB") of
    device memory and of host cache; yields (http_port, grpc_stub, grpc_service_pb2) once gRPC says
    ready. Stops the server on the way out; when the body raised, prints the tail of its log
    (work/serve.log) first."""
    import grpc

    pb, rpc = grpc_stubs(work)
    hport, gport = free_port(), free_port()
    log_path = os.path.join(work, "serve.log")
    with open(log_path, "w") as log:
        server = subprocess.Popen([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{hport}", "--grpc",
                                   f"127.0.0.1:{gport}", "--device-memory", memory, "--cache", memory, "--threads",
                                   str(threads)], stdout=log, stderr=subprocess.STDOUT)
        ok = False
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{gport}",
                                            options=[("grpc.max_send_message_length", 256 << 20),
                                                     ("grpc.max_receive_message_length", 256 << 20)])
            stub = rpc.GRPCInferenceServiceStub(channel)
            procs.wait_for("gRPC readiness", lambda: stub.ServerReady(pb.ServerReadyRequest(), timeout=2).ready, 120,
                           ignore=(OSError, grpc.RpcError))
            yield hport, stub, pb
            ok = True
        finally:
            procs.stop(server)
            if not ok:
                procs.print_tail(log_path, 40)
