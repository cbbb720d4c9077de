#!/usr/bin/python3
"""TLS on the API (gateway.tls_certificate, tls_key, tls_key_passphrase_file, tls_client_ca) on
`ember serve`, over HTTP and gRPC, end to end. Certificates are made here with the openssl command
(a cluster CA, a server certificate for 127.0.0.1, a client certificate, and a second CA with a
client certificate of its own).

- A start with a certificate that does not exist, a key of another certificate, an encrypted key
  without its passphrase, a wrong passphrase, or a certificate without a key fails at once with an
  error naming the file or the keys.
- TLS: an HTTPS client that trusts the CA gets answers (health, inference); a plain HTTP client on
  the same port gets none; gRPC over TLS answers, a plaintext gRPC channel fails. An encrypted key
  with its passphrase file serves the same.
- Mutual TLS (tls_client_ca): no client certificate, or one from the other CA, is refused at the
  handshake (HTTP and gRPC); the cluster CA's client certificate is served.
- Certificates made by `ember certs init` and `ember certs issue` serve the same: a client that
  checks the server's address against the certificate (Python's default) and presents an
  `ember certs` client certificate is served over mutual TLS.

Usage: tls_test.py --ember PATH
"""
import argparse
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

from grpc_api_test import Failure, stubs
from ports import free_port
from procs import stop

BODY = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]})


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(d):
    """ca.{key,crt}, server.{key,crt} (SAN 127.0.0.1, localhost), server-enc.key (passphrase in
    pass.txt), client.{key,crt} from the CA, and other-ca.* / other-client.* from another CA."""
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", f"/CN=ember test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.crt", cwd=d)
    for name, ca, ext in (("server", "ca", ["-extfile", "san.cnf"]), ("client", "ca", []),
                          ("other-client", "other-ca", [])):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-days", "2", "-out", f"{name}.crt", *ext, cwd=d)
    with open(os.path.join(d, "pass.txt"), "w") as f:
        f.write("correct horse battery staple\n")
    with open(os.path.join(d, "wrong-pass.txt"), "w") as f:
        f.write("tr0ub4dor\n")
    openssl("pkey", "-in", "server.key", "-aes256", "-passout", "file:pass.txt", "-out", "server-enc.key", cwd=d)


def start(ember, repo, work, extra, config=None):
    port, grpc_port = free_port(), free_port()
    argv = [ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}", "--grpc", f"127.0.0.1:{grpc_port}",
            "--device-memory", "256MiB", "--cache", "256MiB", "--threads", "1", "--load", "mlp"] + extra
    if config:
        path = os.path.join(work, "ember.yaml")
        with open(path, "w") as f:
            f.write(config)
        argv += ["--config", path]
    log = open(os.path.join(work, "serve.log"), "w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), port, grpc_port


def https(port, d, method, path, body=None, cert=None):
    ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
    if cert:
        ctx.load_cert_chain(os.path.join(d, f"{cert}.crt"), os.path.join(d, f"{cert}.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_ready(server, port, d, cert=None):
    deadline = time.time() + 60
    while time.time() < deadline:
        if server.poll() is not None:
            raise Failure(f"the server exited {server.returncode}")
        try:
            if https(port, d, "GET", "/v2/models/mlp/ready", cert=cert)[0] == 200:
                return
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.2)
    raise Failure("the TLS server did not become ready")


def refused(what, call):
    try:
        call()
    except (OSError, ssl.SSLError, http.client.HTTPException, grpc.RpcError) as e:
        print(f"ok: {what} -> refused ({type(e).__name__})")
        return
    raise Failure(f"{what}: answered, expected a refusal")


def grpc_infer(pb, rpc, port, d, cert=None, secure=True):
    with open(os.path.join(d, "ca.crt"), "rb") as f:
        root = f.read()
    if secure:
        key = chain = None
        if cert:
            with open(os.path.join(d, f"{cert}.key"), "rb") as f:
                key = f.read()
            with open(os.path.join(d, f"{cert}.crt"), "rb") as f:
                chain = f.read()
        channel = grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(root, key, chain))
    else:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    req = pb.ModelInferRequest(model_name="mlp")
    t = req.inputs.add()
    t.name, t.datatype = "input", "FP32"
    t.shape.extend([1, 16])
    req.raw_input_contents.append(np.full(16, 0.5, dtype=np.float32).tobytes())
    try:
        return rpc.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=10)
    finally:
        channel.close()


def bad_starts(ember, repo, work, d):
    cases = (
        (["--tls-certificate", os.path.join(d, "missing.crt"), "--tls-key", os.path.join(d, "server.key")], None,
         "gateway.tls_certificate (" + os.path.join(d, "missing.crt") + "): cannot read: No such file"),
        (["--tls-certificate", os.path.join(d, "server.crt"), "--tls-key", os.path.join(d, "client.key")], None,
         "is not the key of gateway.tls_certificate"),
        (["--tls-certificate", os.path.join(d, "server.crt"), "--tls-key", os.path.join(d, "server-enc.key")], None,
         "cannot load the private key (encrypted? set tls_key_passphrase_file)"),
        ([], f"gateway:\n  tls_certificate: {d}/server.crt\n  tls_key: {d}/server-enc.key\n"
             f"  tls_key_passphrase_file: {d}/wrong-pass.txt\n",
         "with the passphrase of " + os.path.join(d, "wrong-pass.txt")),
        (["--tls-certificate", os.path.join(d, "server.crt")], None,
         "gateway.tls_certificate and gateway.tls_key go together"),
    )
    for extra, config, text in cases:
        server, _, _ = start(ember, repo, work, extra, config)
        try:
            rc = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Failure(f"a start with {extra or config} kept running")
        finally:
            stop(server)
        with open(os.path.join(work, "serve.log")) as f:
            said = f.read()
        if rc == 0 or text not in said:
            raise Failure(f"a start with {extra or config}: rc {rc}, said: {said[-300:]}")
        error = [line for line in said.splitlines() if line.startswith("error:")]
        if len(said.splitlines()) > 2:
            raise Failure(f"a start with {extra or config} started other parts first: {said[-300:]}")
        print(f"ok: start refused: {error[0][:150] if error else said.strip()[-150:]}")


def check_tls(ember, pb, rpc, repo, work, d):
    cert = ["--tls-certificate", os.path.join(d, "server.crt"), "--tls-key", os.path.join(d, "server.key")]
    server, port, grpc_port = start(ember, repo, work, cert)
    try:
        wait_ready(server, port, d)
        status, body = https(port, d, "POST", "/v2/models/mlp/infer", BODY)
        if status != 200 or json.loads(body)["outputs"][0]["shape"] != [1, 4]:
            raise Failure(f"HTTPS inference: {status} {body[:200]}")
        print("ok: HTTPS (the CA trusted): health and inference answer")

        def plain():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/v2/health/live")
            r = conn.getresponse()
            raise Failure(f"plain HTTP on the TLS port answered {r.status}")

        refused("plain HTTP on the TLS port", plain)
        if list(grpc_infer(pb, rpc, grpc_port, d).outputs[0].shape) != [1, 4]:
            raise Failure("gRPC over TLS: a wrong answer")
        print("ok: gRPC over TLS answers")
        refused("a plaintext gRPC channel on the TLS port", lambda: grpc_infer(pb, rpc, grpc_port, d, secure=False))
    finally:
        stop(server)
    config = (f"gateway:\n  tls_certificate: {d}/server.crt\n  tls_key: {d}/server-enc.key\n"
              f"  tls_key_passphrase_file: {d}/pass.txt\n")
    server, port, grpc_port = start(ember, repo, work, [], config)
    try:
        wait_ready(server, port, d)
        grpc_infer(pb, rpc, grpc_port, d)
        print("ok: an encrypted key with its passphrase file serves HTTPS and gRPC over TLS")
    finally:
        stop(server)


def check_mutual(ember, pb, rpc, repo, work, d):
    extra = ["--tls-certificate", os.path.join(d, "server.crt"), "--tls-key", os.path.join(d, "server.key"),
             "--tls-client-ca", os.path.join(d, "ca.crt")]
    server, port, grpc_port = start(ember, repo, work, extra)
    try:
        wait_ready(server, port, d, cert="client")
        if https(port, d, "POST", "/v2/models/mlp/infer", BODY, cert="client")[0] != 200:
            raise Failure("mutual TLS: the CA's client certificate was not served")
        print("ok: mutual TLS: the cluster CA's client certificate is served (HTTPS)")
        refused("HTTPS without a client certificate", lambda: https(port, d, "GET", "/v2/health/live"))
        refused("HTTPS with another CA's client certificate",
                lambda: https(port, d, "GET", "/v2/health/live", cert="other-client"))
        grpc_infer(pb, rpc, grpc_port, d, cert="client")
        print("ok: mutual TLS: the cluster CA's client certificate is served (gRPC)")
        refused("gRPC without a client certificate", lambda: grpc_infer(pb, rpc, grpc_port, d))
        refused("gRPC with another CA's client certificate",
                lambda: grpc_infer(pb, rpc, grpc_port, d, cert="other-client"))
        if server.poll() is not None:
            raise Failure("the server died")
    finally:
        stop(server)


def check_ember_certs(ember, pb, rpc, repo, work):
    d = os.path.join(work, "ember-certs")
    for args in (["init", "--dir", d], ["issue", "--dir", d, "--name", "gateway", "--role", "gateway", "--san",
                                        "127.0.0.1,localhost"],
                 ["issue", "--dir", d, "--name", "client", "--role", "client"]):
        subprocess.run([ember, "certs", *args], check=True, capture_output=True)
    extra = ["--tls-certificate", os.path.join(d, "gateway.crt"), "--tls-key", os.path.join(d, "gateway.key"),
             "--tls-client-ca", os.path.join(d, "ca.crt")]
    server, port, grpc_port = start(ember, repo, work, extra)
    try:
        wait_ready(server, port, d, cert="client")  # Python checks 127.0.0.1 against the certificate's SAN
        grpc_infer(pb, rpc, grpc_port, d, cert="client")
        refused("HTTPS without a client certificate (ember certs CA)", lambda: https(port, d, "GET", "/v2/health/live"))
        print("ok: `ember certs` made the CA, the gateway's and a client's certificate: mutual TLS serves them")
    finally:
        stop(server)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ember-tls-")
    try:
        pb, rpc = stubs(work)
        repo = os.path.join(work, "repo")
        subprocess.run([args.ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "5", "--out",
                        os.path.join(repo, "mlp", "1")], check=True, capture_output=True)
        d = os.path.join(work, "certs")
        os.makedirs(d)
        make_certificates(d)
        bad_starts(args.ember, repo, work, d)
        check_tls(args.ember, pb, rpc, repo, work, d)
        check_mutual(args.ember, pb, rpc, repo, work, d)
        check_ember_certs(args.ember, pb, rpc, repo, work)
    except Failure as e:
        print(f"FAIL: {e}")
        try:
            with open(os.path.join(work, "serve.log")) as f:
                print("--- serve.log\n" + "\n".join(f.read().splitlines()[-20:]))
        except OSError:
            pass
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
