#!/usr/bin/python3
"""Text generation's routes on `ember serve`, wired to the gateway's ClusterGenerations: a generative
model imported from a Hugging Face folder (tools/make_hf_model.py, its generated tiny tokenizer) is
listed by GET /v1/models and a plain model is not; a plain model asked to generate is refused with
400 (OpenAI's and KServe's shapes), an unknown model with 404. What the node generates is its own
part's test (this one does not ask the node for tokens).

Usage: generation_serve_test.py --ember PATH
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ports import free_port
from procs import Failure, print_tail, stop

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def expect(port, method, path, status, body=None, error=None):
    got, text = call(port, method, path, body)
    if got != status or (error is not None and error not in text):
        raise Failure(f"{method} {path}: HTTP {got} {text[:300]}; expected {status}" +
                      (f" with '{error}'" if error else ""))
    print(f"ok: {method} {path} -> {status}")
    return text


def run(ember):
    work = tempfile.mkdtemp(prefix="ember-gen-serve-")
    server = None
    try:
        repo = os.path.join(work, "repo")
        hf = os.path.join(work, "hf")
        subprocess.run([sys.executable, os.path.join(TOOLS, "make_hf_model.py"), "--out", hf, "--family", "llama",
                        "--tokenizer", "tiny", "--layers", "1", "--seed", "2"], check=True, capture_output=True)
        subprocess.run([ember, "model", "import", hf, "--out", os.path.join(repo, "lm", "1"), "--name", "lm"],
                       check=True, capture_output=True)
        subprocess.run([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "5", "--out",
                        os.path.join(repo, "mlp", "1")], check=True, capture_output=True)
        with open(os.path.join(repo, "lm", "1", "model.json")) as f:
            context = json.load(f)["generation"]["context_length"]
        port = free_port()
        log = open(os.path.join(work, "serve.log"), "w")
        server = subprocess.Popen([ember, "serve", "--repository", repo, "--http", f"127.0.0.1:{port}",
                                   "--device-memory", "256MiB", "--cache", "256MiB", "--threads", "1"],
                                  stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while True:
            try:
                if call(port, "GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise Failure("the server did not become ready")
            time.sleep(0.1)

        models = json.loads(expect(port, "GET", "/v1/models", 200))
        ids = [m["id"] for m in models["data"]]
        if ids != ["lm"]:
            raise Failure(f"/v1/models lists {ids}, expected ['lm'] (the generative model only)")
        if models["data"][0].get("max_model_len") != context:
            raise Failure(f"/v1/models: max_model_len {models['data'][0].get('max_model_len')}, expected {context}")

        text = expect(port, "POST", "/v1/completions", 400, {"model": "mlp", "prompt": "hi", "max_tokens": 2},
                      error="does not generate text")
        if json.loads(text)["error"]["type"] != "invalid_request_error":
            raise Failure(f"/v1/completions for mlp: not OpenAI's error shape: {text}")
        expect(port, "POST", "/v1/chat/completions", 400,
               {"model": "mlp", "messages": [{"role": "user", "content": "hi"}]}, error="does not generate text")
        expect(port, "POST", "/v2/models/mlp/generate", 400, {"text_input": "hi"}, error="does not generate text")
        expect(port, "POST", "/v1/completions", 404, {"model": "nope", "prompt": "hi"}, error="nope")
        expect(port, "POST", "/v2/models/nope/generate_stream", 404, {"text_input": "hi"}, error="nope")
        if server.poll() is not None:
            raise Failure("the server died")
        print("PASS")
        return 0
    except (Failure, subprocess.CalledProcessError) as e:
        print(f"FAIL: {e}")
        if isinstance(e, subprocess.CalledProcessError):
            print(e.stderr.decode() if e.stderr else "")
        print_tail(os.path.join(work, "serve.log"))
        return 1
    finally:
        if server:
            stop(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ember", required=True)
    sys.exit(run(p.parse_args().ember))
