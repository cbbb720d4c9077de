#!/usr/bin/env python3
"""Text generation through the serving path (issue 35): time to first token and decode tokens/s as a
client sees them, over OpenAI's streamed completions API, in the cases late binding and multicast make:

  warm       the model resident on the device
  swap-in    the model evicted by another model first, copied back in from host memory
  cold       no replica anywhere: a cluster (manager + 2 nodes) loads it on the request (the gateway's
             cold start: one replica, its bytes sent by the manager from the repository), profiles it,
             and then streams
  peer       a second replica of it seeded from the first node's memory by a chain (KServe's load with
             replicas 2), the first node killed, then a stream on the new replica
  shared     two LLMs streaming at once on one device that holds only one of them (each binding
             evicts the other; their KV caches are set aside and taken back), against each alone

  generation_serving.py --ember build/bin/ember [--size 1gib|small] [--tokens 16] [--repeat 3]

--size 1gib makes a Llama-style model of about 1.4 GB (fp32, Llama 2's tokenizer) with
tools/make_hf_model.py; small makes a 213 MiB one for a quick check of the script. The second model
(the one that evicts the first) is a GPT-2-style model of about 300 MB (small: 27 MB). Models are
made once under build/bench-models/serving-*. Each figure is the median of --repeat requests; a
request asks --tokens greedy tokens (EOS ignored) of a fixed 8-token prompt. TTFT is from sending
the request to the first chunk with text; tokens/s is (tokens - 1) over the time from that chunk to
the last. Prints one table; figures are this machine's, measured side by side in one run.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from cluster_test import node_replicas, request, wait_for  # noqa: E402
from ports import free_port  # noqa: E402

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PROMPT = [1, 450, 4996, 17354, 1701, 29916, 432, 17204]

SIZES = {  # name: (make_hf_model options of the model under test, of the evicting one, device memory)
    "1gib": (["--family", "llama", "--tokenizer", "llama2", "--hidden", "1536", "--layers", "10", "--heads", "12",
              "--kv-heads", "4", "--intermediate", "4096", "--positions", "512", "--no-tie", "--seed", "7"],
             ["--family", "gpt2", "--tokenizer", "gpt2", "--hidden", "512", "--layers", "8", "--heads", "8",
              "--positions", "512", "--seed", "8"], "1792MiB"),
    "small": (["--family", "llama", "--tokenizer", "llama2", "--hidden", "512", "--layers", "8", "--heads", "8",
               "--kv-heads", "2", "--intermediate", "1408", "--positions", "512", "--no-tie", "--seed", "7"],
              ["--family", "gpt2", "--tokenizer", "gpt2", "--hidden", "64", "--layers", "2", "--positions", "512",
               "--seed", "8"], "464MiB"),
}


def make(ember, work, name, options):
    """An imported model under work/repo/NAME/1 (made once)."""
    folder, out = os.path.join(work, name + "-hf"), os.path.join(work, "repo", name, "1")
    if not os.path.exists(os.path.join(out, "model.json")):
        subprocess.run([PY, os.path.join(ROOT, "tools", "make_hf_model.py"), "--out", folder, *options], check=True,
                       capture_output=True)
        subprocess.run([ember, "--log-level", "warn", "model", "import", folder, "--out", out, "--name", name],
                       check=True, capture_output=True)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    return size


def stream(port, model, tokens, timeout=900):
    """One streamed completion: (TTFT s, decode tokens/s, tokens received)."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    sent = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{model}: HTTP {r.status} {r.read()[:300]}")
    first = last = None
    got = 0
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        if "error" in chunk:
            raise RuntimeError(f"{model}: {chunk['error']}")
        if chunk.get("usage"):
            got = chunk["usage"]["completion_tokens"]
        if any(c.get("text") for c in chunk.get("choices", [])):
            last = time.perf_counter()
            first = first or last
    conn.close()
    ttft = first - sent
    rate = (got - 1) / (last - first) if got > 1 and last > first else float("nan")
    return ttft, rate, got


def median_of(runs):
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def serve(ember, work, device_memory, logs):
    port = free_port()
    log = open(os.path.join(work, f"serve-{port}.log"), "w")
    logs.append(log)
    p = subprocess.Popen([ember, "serve", "--repository", os.path.join(work, "repo"), "--http", f"127.0.0.1:{port}",
                          "--device", "sim", "--device-memory", device_memory], stdout=log, stderr=subprocess.STDOUT)
    wait_for("ember serve", lambda: request(port, "GET", "/v2/health/ready")[0] == 200, 120)
    return p, port


def metric(port, name, **labels):
    status, text = request(port, "GET", "/metrics")
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(line.rsplit(" ", 1)[1]) for line in (text.splitlines() if status == 200 else [])
               if line.startswith(name + "{") and all(w in line for w in wanted))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="1gib")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if a.tokens < 2 or a.repeat < 1:
        sys.exit("generation_serving: --tokens must be at least 2 and --repeat at least 1")
    work = os.path.join(ROOT, "build", "bench-models", "serving-" + a.size)
    os.makedirs(work, exist_ok=True)
    big_options, other_options, device_memory = SIZES[a.size]
    big, other = "llm", "evictor"
    big_bytes = make(a.ember, work, big, big_options)
    other_bytes = make(a.ember, work, other, other_options)
    print(f"models: {big} {big_bytes / 2**30:.2f} GiB, {other} {other_bytes / 2**20:.0f} MiB; device {device_memory}; "
          f"{a.tokens} tokens per request, median of {a.repeat}; load average {os.getloadavg()[0]:.1f}")
    rows, procs, logs = [], [], []
    try:
        p, port = serve(a.ember, work, device_memory, logs)
        procs.append(p)
        stream(port, big, 2)      # registered, profiled, resident
        warm = [stream(port, big, a.tokens) for _ in range(a.repeat)]
        rows.append(("warm", *median_of(warm)))
        swapped = []
        for _ in range(a.repeat):
            stream(port, other, 2)  # evicts the model under test
            swapped.append(stream(port, big, a.tokens))
        rows.append(("after a swap-in from host memory", *median_of(swapped)))
        # Shared: both at once, against each alone (the runs above: big alone; the other's now).
        alone_other = median_of([stream(port, other, a.tokens) for _ in range(a.repeat)])
        parked_before = metric(port, "ember_generation_parked_total", event="evicted")
        shared = {big: [], other: []}
        for _ in range(a.repeat):
            out = {}
            threads = [threading.Thread(target=lambda m=m: out.__setitem__(m, stream(port, m, a.tokens)))
                       for m in (big, other)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for m in (big, other):
                shared[m].append(out[m])
        parked = metric(port, "ember_generation_parked_total", event="evicted") - parked_before
        rows.append((f"shared device, {big} (alone: warm above)", *median_of(shared[big])))
        rows.append((f"shared device, {other} (alone: {alone_other[0]:.3f} s, {alone_other[1]:.1f} tok/s)",
                     *median_of(shared[other])))
        p.terminate()
        p.wait()
        procs.clear()
        # Cold: a cluster whose nodes hold nothing; the first request loads the model on both.
        mport, hport = free_port(), free_port()
        config = os.path.join(work, "cold.yaml")
        with open(config, "w") as f:
            f.write("gateway:\n  request_timeout: 600s\n  cold_start_timeout: 600s\n")
        log = open(os.path.join(work, "cold.log"), "w")
        logs.append(log)
        procs.append(subprocess.Popen([a.ember, "manager", "--config", config, "--listen", f"127.0.0.1:{mport}",
                                       "--repository", os.path.join(work, "repo"), "--http", f"127.0.0.1:{hport}"],
                                      stdout=log, stderr=subprocess.STDOUT))
        wait_for("the manager", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 60)
        for n in ("node1", "node2"):
            procs.append(subprocess.Popen([a.ember, "node", "--config", config, "--manager", f"127.0.0.1:{mport}",
                                           "--name", n, "--device-memory", device_memory, "--cache", "4GiB"],
                                          stdout=log, stderr=subprocess.STDOUT))
        wait_for("two nodes", lambda: len(node_replicas(hport)) == 2, 60)
        cold = stream(hport, big, a.tokens)
        rows.append(("cold start in a cluster (no replica anywhere)", cold[0], cold[1]))
        # From a peer: a second replica asked for (KServe's load, replicas 2) is seeded from node1's
        # memory by a chain; the load answers once it is ready. node1 is then killed, so the next
        # stream runs on the new replica: its first token comes after the replica's cold start plus
        # that stream's own TTFT.
        started = time.perf_counter()
        status, body = request(hport, "POST", f"/v2/repository/models/{big}/load", {"parameters": {"replicas": 2}},
                               timeout=900)
        peer_s = time.perf_counter() - started
        if status != 200 or node_replicas(hport).get("node2", 0) < 1:
            raise RuntimeError(f"the second replica: HTTP {status} {body[:300]}, replicas {node_replicas(hport)}")
        procs[1].kill()
        procs[1].wait()
        wait_for("node1's replica gone", lambda: node_replicas(hport).get("node1", 0) == 0, 60)
        after = stream(hport, big, a.tokens)
        rows.append(("cold start from a peer's memory (replica ready, then its first stream)", peer_s + after[0],
                     after[1]))
        peer_note = f"from a peer: the replica ready {peer_s:.3f} s after the load, then TTFT {after[0]:.3f} s"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        for log in logs:
            log.close()
    print(f"\n| case | TTFT s | decode tok/s | TTFT / warm |\n|---|---|---|---|")
    for name, ttft, rate in rows:
        print(f"| {name} | {ttft:.3f} | {rate:.1f} | {ttft / rows[0][1]:.1f} |")
    print(f"\n{peer_note}")
    print(f"shared device: {parked:.0f} stream set-asides (ember_generation_parked_total{{event=\"evicted\"}}); "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
