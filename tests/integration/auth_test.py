#!/usr/bin/python3
"""API bearer tokens (gateway.api_tokens_file) on `ember serve`, over HTTP and gRPC, end to end; and
the token-free metrics port (gateway.metrics), which serves /metrics and nothing else.

A server started with a token file that cannot be read, or holds no token, refuses to start and
names the file. A server with tokens keeps its health checks open (HTTP /v2/health/live and /ready,
gRPC ServerLive, ServerReady and grpc.health.v1) and refuses every other call without a token (401
with WWW-Authenticate, gRPC UNAUTHENTICATED), with a malformed one (the same) and with an unknown
one (403, PERMISSION_DENIED); with a token from the file, inference, metadata, the repository index
and /metrics answer as without tokens. Changing what the cluster serves (load, unload, distribute,
evict; gRPC RepositoryModelLoad and Unload) needs a token with the repository scope ("TOKEN admin"
here): any other token is 403 / PERMISSION_DENIED saying so. The refusals are counted in
ember_auth_refusals_total. A tenant's token (infer=mlp rate=... concurrent=...) infers on mlp alone
and, past its burst, is answered 429 with Retry-After (gRPC RESOURCE_EXHAUSTED with trailing
retry-after), counted per token in ember_api_calls_total while the other tokens go on.

Usage: auth_test.py --ember PATH
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import grpc
import numpy as np

from grpc_api_test import Failure, health, http_call, stubs, wait_for
from ports import free_port
from procs import print_tail, stop

TOKENS = ("# API tokens of the test\nfirst-token-123\n\n  second_token-456  \nadmin-token-789 admin\n"
          "tenant-token-1 infer=mlp rate=0.02 concurrent=2 name=tenant\n")
TENANT = "tenant-token-1"
ADMIN = "admin-token-789"
SCOPE = "needs the repository scope"
BODY = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]})


def bad_starts(ember, work, repo):
    """A token file that is missing or empty stops the start with an error naming it."""
    empty = os.path.join(work, "empty.tokens")
    with open(empty, "w") as f:
        f.write("# nothing here\n")
    for path, text in ((os.path.join(work, "missing.tokens"), "cannot read"), (empty, "no token in the file")):
        r = subprocess.run([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{free_port()}",
                            "--device-memory", "256MiB", "--cache", "256MiB", "--api-tokens-file", path],
                           capture_output=True, text=True, timeout=60)
        said = r.stdout + r.stderr
        if r.returncode == 0 or f"gateway.api_tokens_file ({path})" not in said or text not in said:
            raise Failure(f"a start with {path}: rc {r.returncode}, said: {said[-300:]}")
        print(f"ok: a start with a bad token file fails: ...{said.strip().splitlines()[-1][-110:]}")


def check_http(port):
    def expect(method, path, status, headers=None, body=None, text=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        got, reply, got_headers = http_call(port, method, path, body, h)
        if got != status or (text and text not in reply.decode(errors="replace")):
            raise Failure(f"{method} {path} {headers}: HTTP {got} {reply[:200]}, expected {status} {text or ''}")
        return got_headers, reply

    expect("GET", "/v2/health/live", 200)
    expect("GET", "/v2/health/ready", 200)
    good = {"Authorization": "Bearer second_token-456"}
    for method, path, body in (("GET", "/v2", None), ("GET", "/v2/models/mlp", None), ("GET", "/metrics", None),
                               ("POST", "/v2/models/mlp/infer", BODY), ("POST", "/v2/repository/index", "{}")):
        headers, _ = expect(method, path, 401, body=body, text="needs a bearer token")
        if headers.get("www-authenticate") != 'Bearer realm="ember"':
            raise Failure(f"{path}: 401 without WWW-Authenticate: {headers}")
        expect(method, path, 401, {"Authorization": "Basic Zm9vOmJhcg=="}, body, "not a bearer token")
        expect(method, path, 403, {"Authorization": "Bearer first-token-12"}, body, "not one of this gateway's")
        expect(method, path, 200, good, body)
    _, reply = expect("POST", "/v2/models/mlp/infer", 200, {"Authorization": "bearer first-token-123"}, BODY)
    if json.loads(reply)["outputs"][0]["shape"] != [1, 4]:
        raise Failure(f"the authorized inference: {reply[:200]}")
    _, metrics = expect("GET", "/metrics", 200, good)
    text = metrics.decode()
    for line in ('ember_auth_refusals_total{node="gateway",protocol="http",reason="unauthenticated"} 10',
                 'ember_auth_refusals_total{node="gateway",protocol="http",reason="permission_denied"} 5'):
        if line not in text:
            counted = [x for x in text.splitlines() if x.startswith("ember_auth_refusals_total")]
            raise Failure(f"/metrics lacks {line}: {counted}")
    print("ok: HTTP: health open; 401, 401, 403, 200 on every other endpoint; refusals counted")


def check_http_changes(port):
    """Loads, unloads, distributions and evictions: 403 with a token without the admin scope (nothing
    changes), done with the admin token; the model serves again after its reload."""
    def call(method, path, token, body="{}"):
        return http_call(port, method, path, body, {"Content-Type": "application/json",
                                                    "Authorization": f"Bearer {token}"})

    for path in ("/v2/repository/models/mlp/load", "/v2/repository/models/mlp/unload",
                 "/ember/v1/models/mlp/distribute", "/ember/v1/models/mlp/evict"):
        status, reply, _ = call("POST", path, "first-token-123")
        if status != 403 or SCOPE not in reply.decode():
            raise Failure(f"POST {path} without the admin scope: HTTP {status} {reply[:200]}, expected 403")
    status, reply, _ = call("POST", "/v2/models/mlp/infer", "first-token-123", BODY)
    if status != 200:
        raise Failure(f"mlp after the refused unload: HTTP {status} {reply[:200]}")
    for path, want in (("/v2/repository/models/mlp/unload", 200), ("/v2/models/mlp/infer", 400),
                       ("/v2/repository/models/mlp/load", 200), ("/v2/models/mlp/ready", 200),
                       ("/v2/models/mlp/infer", 200)):
        get = path.endswith("ready")
        status, reply, _ = call("GET" if get else "POST", path, ADMIN,
                                None if get else BODY if path.endswith("infer") else "{}")
        if status != want:
            raise Failure(f"{path} with the admin token: HTTP {status} {reply[:200]}, expected {want}")
    print("ok: HTTP: load, unload, distribute and evict refused (403) without the admin scope; with it, "
          "mlp unloaded and loaded again")


def check_grpc(pb, rpc, port):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = rpc.GRPCInferenceServiceStub(channel)
    if not stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live:
        raise Failure("ServerLive without a token")
    if not stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready:
        raise Failure("ServerReady without a token")
    if health(channel) != 1:
        raise Failure("the health service without a token")
    req = pb.ModelInferRequest(model_name="mlp")
    t = req.inputs.add()
    t.name, t.datatype = "input", "FP32"
    t.shape.extend([1, 16])
    req.raw_input_contents.append(np.full(16, 0.5, dtype=np.float32).tobytes())
    calls = (("ModelInfer", lambda md: stub.ModelInfer(req, timeout=30, metadata=md)),
             ("ModelMetadata", lambda md: stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"), timeout=10,
                                                             metadata=md)),
             ("RepositoryIndex", lambda md: stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=10,
                                                                 metadata=md)))
    for name, call in calls:
        for md, code, text in ((None, grpc.StatusCode.UNAUTHENTICATED, "needs a bearer token"),
                               ((("authorization", "Token first-token-123"),), grpc.StatusCode.UNAUTHENTICATED,
                                "not a bearer token"),
                               ((("authorization", "Bearer nope"),), grpc.StatusCode.PERMISSION_DENIED,
                                "not one of this gateway's")):
            try:
                call(md)
            except grpc.RpcError as e:
                if e.code() != code or text not in e.details():
                    raise Failure(f"{name} with {md}: {e.code()} {e.details()}, expected {code}")
                continue
            raise Failure(f"{name} with {md}: answered, expected {code}")
        call((("authorization", "Bearer first-token-123"),))
    reply = stub.ModelInfer(req, timeout=30, metadata=(("authorization", "Bearer second_token-456"),))
    if list(reply.outputs[0].shape) != [1, 4]:
        raise Failure(f"the authorized gRPC inference: {reply}")
    changes = (("RepositoryModelLoad", lambda md: stub.RepositoryModelLoad(
                    pb.RepositoryModelLoadRequest(model_name="mlp"), timeout=60, metadata=md)),
               ("RepositoryModelUnload", lambda md: stub.RepositoryModelUnload(
                    pb.RepositoryModelUnloadRequest(model_name="mlp"), timeout=60, metadata=md)))
    for name, call in changes:
        try:
            call((("authorization", "Bearer second_token-456"),))
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.PERMISSION_DENIED or SCOPE not in e.details():
                raise Failure(f"{name} without the admin scope: {e.code()} {e.details()}")
        else:
            raise Failure(f"{name} without the admin scope: answered, expected PERMISSION_DENIED")
    admin = (("authorization", f"Bearer {ADMIN}"),)
    for name, call in reversed(changes):  # unload, then load again
        call(admin)
    reply = stub.ModelInfer(req, timeout=30, metadata=admin)
    if list(reply.outputs[0].shape) != [1, 4]:
        raise Failure(f"gRPC inference after the admin's reload: {reply}")
    channel.close()
    print("ok: gRPC: ServerLive, ServerReady and health open; UNAUTHENTICATED, UNAUTHENTICATED, "
          "PERMISSION_DENIED, OK on every other call; RepositoryModelLoad and Unload PERMISSION_DENIED without "
          "the admin scope, done with it")


def check_tenant(pb, rpc, port, grpc_port):
    """The tenant's token: mlp only (another model's name and /metrics are 403, and spend nothing of
    its rate), one call from rest, then one per 50 s: the second is 429 with Retry-After over HTTP and RESOURCE_EXHAUSTED
    over gRPC; another token is untouched; counted by the token's name."""
    h = {"Content-Type": "application/json", "Authorization": f"Bearer {TENANT}"}
    status, reply, _ = http_call(port, "GET", "/metrics", None, h)
    if status != 403 or "metrics scope" not in reply.decode():
        raise Failure(f"/metrics with the tenant's token: HTTP {status} {reply[:200]}, expected 403")
    status, reply, _ = http_call(port, "POST", "/v2/models/resnet/infer", BODY, h)
    if status != 403 or "may not use model 'resnet'" not in reply.decode():
        raise Failure(f"another model with the tenant's token: HTTP {status} {reply[:200]}, expected 403")
    status, reply, _ = http_call(port, "POST", "/v2/models/mlp/infer", BODY, h)  # its one call from rest
    if status != 200:
        raise Failure(f"mlp with the tenant's token: HTTP {status} {reply[:200]}")
    status, reply, headers = http_call(port, "POST", "/v2/models/mlp/infer", BODY, h)
    retry = int(headers.get("retry-after", "0"))
    if status != 429 or not 40 <= retry <= 50 or "over its rate" not in reply.decode():
        raise Failure(f"the tenant past its burst: HTTP {status} Retry-After {retry} {reply[:200]}, expected 429")
    status, _, _ = http_call(port, "POST", "/v2/models/mlp/infer", BODY,
                             {"Content-Type": "application/json", "Authorization": "Bearer first-token-123"})
    if status != 200:
        raise Failure(f"another token while the tenant is over its rate: HTTP {status}")
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    stub = rpc.GRPCInferenceServiceStub(channel)
    try:
        stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"), timeout=10,
                           metadata=(("authorization", f"Bearer {TENANT}"),))
        raise Failure("gRPC with the tenant's token past its rate: answered, expected RESOURCE_EXHAUSTED")
    except grpc.RpcError as e:
        trailing = dict(e.trailing_metadata() or ())
        if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or not 40 <= int(trailing.get("retry-after", 0)) <= 50:
            raise Failure(f"gRPC past the tenant's rate: {e.code()} {e.details()} {trailing}")
    channel.close()
    _, metrics, _ = http_call(port, "GET", "/metrics", None, {"Authorization": "Bearer first-token-123"})
    text = metrics.decode()
    for line in ('ember_api_calls_total{node="gateway",token="tenant",outcome="admitted"} 1',
                 'ember_api_calls_total{node="gateway",token="tenant",outcome="permission_denied"} 2',
                 'ember_api_calls_total{node="gateway",token="tenant",outcome="rate_limited"} 2'):
        if line not in text:
            counted = [x for x in text.splitlines() if x.startswith("ember_api_calls_total") and "tenant" in x]
            raise Failure(f"/metrics lacks {line}: {counted}")
    print(f"ok: the tenant's token: other models and /metrics 403; past its burst 429 Retry-After {retry} and "
          "RESOURCE_EXHAUSTED; another token untouched; counted per token")


def check_metrics_port(port):
    """gateway.metrics: /metrics without a token, for a Prometheus inside the cluster; nothing else."""
    status, body, headers = http_call(port, "GET", "/metrics")
    if status != 200 or "ember_requests_total" not in body.decode() or "text/plain" not in headers["content-type"]:
        raise Failure(f"the metrics port: HTTP {status} {body[:200]}")
    status, body, _ = http_call(port, "POST", "/v2/models/mlp/infer", BODY)
    if status != 404 or "serves GET /metrics only" not in body.decode():
        raise Failure(f"the metrics port answered an inference: HTTP {status} {body[:200]}")
    print("ok: gateway.metrics serves /metrics without a token, and nothing else")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ember-auth-")
    server = None
    try:
        pb, rpc = stubs(work)
        repo = os.path.join(work, "repo")
        subprocess.run([args.ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "5", "--out",
                        os.path.join(repo, "mlp", "1")], check=True, capture_output=True)
        bad_starts(args.ember, work, repo)
        tokens = os.path.join(work, "api.tokens")
        with open(tokens, "w") as f:
            f.write(TOKENS)
        port, grpc_port, metrics_port = free_port(), free_port(), free_port()
        log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen([args.ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}",
                                   "--grpc", f"127.0.0.1:{grpc_port}", "--device-memory", "256MiB", "--cache",
                                   "256MiB", "--threads", "1", "--api-tokens-file", tokens, "--load", "mlp",
                                   "--metrics", f"127.0.0.1:{metrics_port}"],
                                  stdout=log, stderr=subprocess.STDOUT)
        wait_for("the server to be ready", lambda: http_call(port, "GET", "/v2/health/ready")[0] == 200, 30)
        wait_for("mlp to be ready", lambda: http_call(port, "GET", "/v2/models/mlp/ready", None,
                                                      {"Authorization": "Bearer first-token-123"})[0] == 200, 60)
        check_http(port)
        check_http_changes(port)
        check_grpc(pb, rpc, grpc_port)
        check_tenant(pb, rpc, port, grpc_port)
        check_metrics_port(metrics_port)
        if server.poll() is not None:
            raise Failure("the server died")
    except Failure as e:
        print(f"FAIL: {e}")
        print_tail(os.path.join(work, "serve.log"))
        return 1
    finally:
        stop(server)
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
