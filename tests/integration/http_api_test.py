#!/usr/bin/python3
"""The KServe v2 REST API of `ember serve`, end to end: every endpoint, and every kind of bad input
getting a clear 4xx with a JSON error while the server keeps serving. POSTs whose body is optional
are also sent exactly as `curl -X POST URL` sends them: no Content-Length, no body.

Usage: http_api_test.py --ember PATH
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from ports import free_port
from procs import Failure, print_tail, stop


class Api:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            data = raw if raw is not None else (json.dumps(body) if body is not None else "{}")
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read().decode(), dict(r.getheaders())
        finally:
            conn.close()

    def binary(self, path, header, data, length=None):
        """POST with the binary tensor data extension: `header` (JSON bytes), then `data`; the
        Inference-Header-Content-Length is len(header) unless `length` says otherwise."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", path, body=header + data,
                         headers={"Content-Type": "application/octet-stream",
                                  "Inference-Header-Content-Length": str(len(header) if length is None else length)})
            r = conn.getresponse()
            return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
        finally:
            conn.close()

    def expect_binary_error(self, header, data, error, length=None):
        status, body, _ = self.binary("/v2/models/mlp/infer", json.dumps(header).encode(), data, length)
        message = json.loads(body.decode())["error"] if status == 400 else body[:200]
        if status != 400 or error not in message:
            raise Failure(f"binary request: HTTP {status} '{message}', expected 400 with '{error}'")
        print(f"ok: binary POST -> 400 {message[:100]}")

    def bare_post(self, path):
        """Exactly the bytes of `curl -X POST http://127.0.0.1:PORT<path>`: no Content-Length, no body."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                       "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n").encode())
            started = time.time()
            r = http.client.HTTPResponse(s)
            r.begin()
            text = r.read().decode()
            return r.status, text, time.time() - started

    def expect_bare_post(self, path, status):
        got, text, seconds = self.bare_post(path)
        if got != status:
            raise Failure(f"bare POST {path}: HTTP {got}, expected {status}: {text[:300]}")
        if seconds > 2:
            raise Failure(f"bare POST {path}: answered after {seconds:.1f} s (waited for a body that never comes)")
        try:
            json.loads(text)
        except ValueError:
            raise Failure(f"bare POST {path}: not JSON: {text[:200]}")
        print(f"ok: bare POST {path} -> {status} in {seconds * 1000:.0f} ms")
        return text

    def expect(self, method, path, status, body=None, raw=None, error=None):
        got, text, headers = self.call(method, path, body, raw)
        if got != status:
            raise Failure(f"{method} {path}: HTTP {got}, expected {status}: {text[:300]}")
        if status >= 400:
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError):
                raise Failure(f"{method} {path}: HTTP {status} without a JSON error: {text[:200]}")
            if error and error not in message:
                raise Failure(f"{method} {path}: error '{message}' lacks '{error}'")
            print(f"ok: {method} {path} -> {status} {message[:110]}")
        else:
            print(f"ok: {method} {path} -> {status}")
        return text, headers


def mlp_request(rows=1, value=0.5, dtype="FP32", width=16):
    return {"id": "req-1", "inputs": [{"name": "input", "datatype": dtype, "shape": [rows, width],
                                       "data": [value] * (rows * width)}]}


def run(ember):
    work = tempfile.mkdtemp(prefix="ember-http-")
    server = None
    try:
        repo = os.path.join(work, "repo")
        for arch, where in (("mlp", "mlp/1"), ("mlp", "mlp/2"), ("bert-base", "bert")):
            subprocess.run([ember, "model", "new", "--arch", arch, "--tiny", "--seed", "5", "--out",
                            os.path.join(repo, where)], check=True, capture_output=True)
        os.makedirs(os.path.join(repo, "broken", "1"))
        shutil.copy(os.path.join(repo, "mlp", "1", "model.json"), os.path.join(repo, "broken", "1"))
        with open(os.path.join(repo, "broken", "1", "weights.safetensors"), "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
        port = free_port()
        log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}",
                                   "--device-memory", "256MiB", "--cache", "256MiB", "--threads", "1"],
                                  stdout=log, stderr=subprocess.STDOUT)
        api = Api(port)
        deadline = time.time() + 20
        while True:
            try:
                if api.call("GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise Failure("the server did not become ready")
            time.sleep(0.1)

        # Server and health.
        text, _ = api.expect("GET", "/v2", 200)
        if json.loads(text)["name"] != "ember" or "model_repository" not in json.loads(text)["extensions"]:
            raise Failure(f"server metadata: {text}")
        api.expect("GET", "/v2/health/live", 200)

        # Metadata and readiness: a cold model is registered but not ready.
        text, _ = api.expect("GET", "/v2/models/mlp", 200)
        meta = json.loads(text)
        if meta["versions"] != ["1", "2"] or meta["inputs"][0] != {"name": "input", "datatype": "FP32", "shape": [-1, 16]}:
            raise Failure(f"metadata: {meta}")
        api.expect("GET", "/v2/models/mlp/versions/1", 200)
        api.expect("GET", "/v2/models/mlp/ready", 400)
        api.expect("GET", "/v2/models/nope", 404, error="unknown model 'nope'")

        # Inference (scale from zero on the first request), default and explicit versions.
        text, _ = api.expect("POST", "/v2/models/mlp/infer", 200, mlp_request(rows=2))
        reply = json.loads(text)
        if reply["model_version"] != "2" or reply["id"] != "req-1" or reply["outputs"][0]["shape"] != [2, 4]:
            raise Failure(f"infer reply: {reply}")
        text, _ = api.expect("POST", "/v2/models/mlp/versions/1/infer", 200, mlp_request())
        if json.loads(text)["model_version"] != "1":
            raise Failure("version 1 not served")
        api.expect("GET", "/v2/models/mlp/ready", 200)

        # The binary tensor data extension (Triton's): raw little-endian bytes instead of JSON numbers,
        # in and out, the same answer as JSON.
        values = [0.25 * (i % 7) - 0.5 for i in range(32)]
        spec = {"name": "input", "datatype": "FP32", "shape": [2, 16]}
        want = json.loads(api.expect("POST", "/v2/models/mlp/infer", 200, {"inputs": [dict(spec, data=values)]})[0])
        want = want["outputs"][0]["data"]
        raw = struct.pack("<32f", *values)
        header = {"inputs": [dict(spec, parameters={"binary_data_size": 128})], "parameters": {"binary_data_output": True}}
        status, body, headers = api.binary("/v2/models/mlp/infer", json.dumps(header).encode(), raw)
        if status != 200 or "inference-header-content-length" not in headers:
            raise Failure(f"binary infer: HTTP {status} {headers} {body[:200]}")
        n = int(headers["inference-header-content-length"])
        out = json.loads(body[:n].decode())["outputs"][0]
        size = out["parameters"]["binary_data_size"]
        got = struct.unpack(f"<{size // 4}f", body[n:n + size])
        if "data" in out or n + size != len(body) or list(got) != want:
            raise Failure(f"binary infer reply: {out}, {len(body)} bytes, {got} vs {want}")
        print(f"ok: binary POST /v2/models/mlp/infer -> 200, {size} bytes of FP32 output, the same as JSON")
        header = {"inputs": [dict(spec, parameters={"binary_data_size": 128})]}  # binary in, JSON out
        status, body, headers = api.binary("/v2/models/mlp/infer", json.dumps(header).encode(), raw)
        if status != 200 or "inference-header-content-length" in headers or json.loads(body)["outputs"][0]["data"] != want:
            raise Failure(f"binary in, JSON out: HTTP {status} {body[:300]}")
        header["outputs"] = [{"name": "fc3", "parameters": {"binary_data": True}}]
        status, body, headers = api.binary("/v2/models/mlp/infer", json.dumps(header).encode(), raw)
        if status != 200 or int(headers.get("inference-header-content-length", 0)) + 32 != len(body):
            raise Failure(f"one output asked binary: HTTP {status} {headers} {body[:300]}")
        sized = {"inputs": [dict(spec, parameters={"binary_data_size": 128})]}
        api.expect_binary_error(sized, raw[:64], "only 64 bytes of binary data are left")
        api.expect_binary_error({"inputs": [dict(spec, parameters={"binary_data_size": 64})]}, raw[:64], "needs 128")
        api.expect_binary_error(sized, raw + b"xx", "2 bytes of binary data follow the JSON")
        api.expect_binary_error(sized, raw, "but the body has only", length=10**6)
        api.expect_binary_error(sized, raw, "is not a length", length="x")
        api.expect_binary_error({"inputs": [dict(spec, parameters={"binary_data_size": 128}, data=values)]}, raw,
                                "has both 'data' and parameters.binary_data_size")
        api.expect("POST", "/v2/models/mlp/infer", 400, {"inputs": [dict(spec, parameters={"binary_data_size": 128})]},
                   error="needs the binary data after the JSON")
        req = mlp_request()
        req["outputs"] = [{"name": "fc3"}]
        api.expect("POST", "/v2/models/mlp/infer", 200, req)

        # Bad input: each a clear 4xx; the server keeps serving.
        api.expect("POST", "/v2/models/mlp/infer", 400, raw='{"inputs": [', error="not valid JSON")
        api.expect("POST", "/v2/models/mlp/infer", 400, raw="[1,2]", error="must be a JSON object")
        api.expect("POST", "/v2/models/mlp/infer", 400, {"inputs": []}, error="'inputs'")
        api.expect("POST", "/v2/models/mlp/infer", 400, mlp_request(dtype="INT64", value=1), error="expected float32")
        api.expect("POST", "/v2/models/mlp/infer", 400, mlp_request(width=15), error="[1, 15]")
        bad = mlp_request()
        bad["inputs"][0]["shape"] = [1, 17]
        api.expect("POST", "/v2/models/mlp/infer", 400, bad, error="holds 16 values but shape [1, 17] needs 17")
        bad = mlp_request()
        bad["inputs"][0]["name"] = "image"
        api.expect("POST", "/v2/models/mlp/infer", 400, bad, error="unexpected input 'image'")
        bad = mlp_request()
        bad["outputs"] = [{"name": "logits"}]
        api.expect("POST", "/v2/models/mlp/infer", 400, bad, error="no output 'logits'")
        api.expect("POST", "/v2/models/nope/infer", 404, mlp_request(), error="unknown model 'nope'")
        api.expect("POST", "/v2/models/mlp/versions/7/infer", 404, mlp_request(), error="version 7")
        big = '{"inputs": [' + " " * (65 << 20) + "]}"
        api.expect("POST", "/v2/models/mlp/infer", 413, raw=big, error="exceeds the configured limit")
        api.expect("GET", "/v2/no/such/thing", 404, error="no such endpoint")
        ids = {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 999]},
                          {"name": "token_type_ids", "datatype": "INT64", "shape": [1, 3], "data": [0, 0, 0]}]}
        api.expect("POST", "/v2/models/bert/infer", 400, ids, error="outside the 100 rows")
        api.expect("POST", "/v2/models/mlp/infer", 200, mlp_request())

        # The repository extension.
        text, _ = api.expect("POST", "/v2/repository/index", 200)
        index = {(e["name"], e["version"]): e for e in json.loads(text)}
        if index[("mlp", "2")]["state"] != "READY" or index[("broken", "1")]["state"] != "UNAVAILABLE":
            raise Failure(f"index: {index}")
        if "weights.safetensors" not in index[("broken", "1")].get("reason", ""):
            raise Failure(f"the broken model's reason: {index[('broken', '1')]}")
        api.expect("POST", "/v2/repository/models/broken/load", 400, error="weights.safetensors")
        api.expect("POST", "/v2/models/broken/infer", 400, mlp_request(), error="cannot load")
        api.expect("POST", "/v2/repository/models/nope/load", 404, error="nope")
        api.expect("POST", "/v2/repository/models/bert/load", 200)
        api.expect("GET", "/v2/models/bert/ready", 200)
        api.expect("POST", "/v2/repository/models/mlp/unload", 200)
        api.expect("POST", "/v2/models/mlp/infer", 400, mlp_request(), error="unloaded")
        api.expect("POST", "/v2/repository/models/mlp/load", 200)
        api.expect("POST", "/v2/models/mlp/infer", 200, mlp_request())

        # The README's and Triton's `curl -X POST URL` (no body) on every endpoint whose body is optional.
        index = {(e["name"], e["version"]): e for e in json.loads(api.expect_bare_post("/v2/repository/index", 200))}
        if index[("mlp", "2")]["state"] != "READY":
            raise Failure(f"bare index: {index}")
        api.expect_bare_post("/v2/repository/models/mlp/unload", 200)
        api.expect("POST", "/v2/models/mlp/infer", 400, mlp_request(), error="unloaded")
        api.expect_bare_post("/v2/repository/models/mlp/load", 200)
        api.expect("GET", "/v2/models/mlp/ready", 200)
        api.expect_bare_post("/ember/v1/models/mlp/distribute", 200)
        api.expect_bare_post("/ember/v1/models/mlp/evict", 200)
        api.expect("POST", "/v2/models/mlp/infer", 200, mlp_request())
        got, text, _ = api.bare_post("/v2/models/mlp/infer")
        if got != 400 or "the request body is empty" not in json.loads(text)["error"]:
            raise Failure(f"bare POST infer: HTTP {got} {text[:200]}")
        print("ok: bare POST /v2/models/mlp/infer -> 400 the request body is empty")

        # Metrics: Prometheus text with the families the issue asks for.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        metrics = r.read().decode()
        if r.status != 200 or "text/plain" not in r.getheader("Content-Type", ""):
            raise Failure(f"/metrics: HTTP {r.status} {r.getheader('Content-Type')}")
        for family in ("ember_requests_total", "ember_request_duration_seconds_bucket", "ember_queue_duration_seconds",
                       "ember_http_rejected_total",
                       "ember_compute_duration_seconds", "ember_cold_starts_total", "ember_model_bytes_fetched_total",
                       "ember_cache_resident_bytes", "ember_device_memory_used_bytes"):
            if family not in metrics:
                raise Failure(f"/metrics lacks {family}")
        if 'outcome="invalid_argument"' not in metrics or 'outcome="success"' not in metrics:
            raise Failure("/metrics does not count outcomes")
        # Device memory by use, read at the scrape: the loaded models' weights are on a device.
        weights = [line for line in metrics.splitlines()
                   if line.startswith("ember_device_memory_in_use_bytes{") and 'use="weights"' in line]
        if not weights or sum(float(line.split()[-1]) for line in weights) <= 0:
            raise Failure(f"/metrics shows no weights in device memory: {weights}")
        # Warm requests ran on the HTTP threads themselves (binding.inline, on by default).
        inline = [line for line in metrics.splitlines()
                  if line.startswith("ember_swap_dispatches_total{") and 'kind="inline"' in line]
        if not inline or float(inline[0].split()[-1]) < 1:
            raise Failure(f"no request ran inline: {inline}")
        print(f"ok: /metrics ({inline[0]})")
        if server.poll() is not None:
            raise Failure("the server died")
        print("PASS")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        print_tail(os.path.join(work, "serve.log"))
        return 1
    finally:
        stop(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    sys.exit(run(ap.parse_args().ember))
