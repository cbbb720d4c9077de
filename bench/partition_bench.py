#!/usr/bin/python3
"""Partitioned cold start benchmark (not a timed test; issue 14): a GPT-2 medium (24 layers, 1.4 GB of
float32 weights) that no node holds is loaded on the emulated cluster (deploy/netns-cluster.sh: 4 nodes,
every node link --rate, MTU 9000, the model repository behind the manager's --repository-rate link, a
storage service's aggregate bandwidth) with p replicas, for each p given: p = 1 loads one whole
replica; p >= 2 lets the manager cut the model into at most p pipeline stages on p nodes
(autoscale.partition_stages), serve through them, and complete each node into a full replica.

Per p, on a fresh cluster: the time from the load request (the scale-up decision) to the first right
answer, C(p); then one client sends requests back to back until p full replicas serve and 10 s more;
every answer is checked against `ember run` of the whole model on the same input. Printed: C(p),
C(1)/p and the ratio C(p) / (C(1)/p) (issue 14's target: at most 1.2 for p = 4), the median latency
through the pipeline and through full replicas (after the switch-over; the first request on each
new replica swaps it in) and the pipeline's penalty, the time until p full
replicas serve, answers per second in each second, and the number of wrong or lost answers (0).

Needs root (network namespaces). Runs with /usr/bin/python3 (numpy).

  sudo bench/partition_bench.py [--ember build/bin/ember] [--p 1,2,4] [--rate 1gbit]
                                [--repository-rate 10gbit] [--completion-rate 50MB/s] [--work DIR] [--seq-len 16]

The members complete at --completion-rate so that their background fetches (and hashing: these
machines have 2 cores for all 5 processes and every simulated device) leave room for serving.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ember_torch  # noqa: E402

NETNS = os.path.join(ROOT, "deploy", "netns-cluster.sh")
HTTP = ("10.231.0.1", 8000)
NODES = 4
MODEL = "gpt2m"


def http_req(method, path, body=None, timeout=60):
    conn = http.client.HTTPConnection(*HTTP, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        conn.close()


def netns(args, ember, check=True):
    return subprocess.run([NETNS, *args], check=check, capture_output=True, text=True,
                          env=dict(os.environ, EMBER=ember), cwd=ROOT)


def full_replicas():
    status, text = http_req("GET", "/metrics", timeout=10)
    return sum(float(v) for v in re.findall(r'^ember_replicas\{node="h\d+"\} (\S+)$', text, re.M))


def pipelined():
    status, text = http_req("GET", "/metrics", timeout=10)
    return sum(float(v) for v in re.findall(r'^ember_pipeline_requests_total\{[^}]*model="' + MODEL + r'"[^}]*\} (\S+)$',
                                            text, re.M))


def make_model(ember, work, seq_len):
    """REPO/gpt2m/1 with its profile, an input and the whole model's output (made once per --work)."""
    repo = os.path.join(work, "repo")
    d = os.path.join(repo, MODEL, "1")
    if not os.path.exists(os.path.join(d, "profile.json")):
        print("writing gpt2-medium (1.4 GB) and profiling it ...", flush=True)
        subprocess.run([ember, "model", "new", "--arch", "gpt2-medium", "--seed", "7", "--name", MODEL, "--out", d],
                       check=True, capture_output=True)
        subprocess.run([ember, "--log-level", "warn", "model", "profile", d, "--batches", "1", "--seq-len",
                        str(seq_len)], check=True, capture_output=True)
    fin, fout = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    ids = np.random.default_rng(11).integers(0, 50257, size=(1, seq_len), dtype=np.int64)
    if not os.path.exists(fout):
        ember_torch.write_safetensors(fin, [("input_ids", ids)])
        subprocess.run([ember, "--log-level", "warn", "run", d, "--input", fin, "--output", fout, "--repeat", "0",
                        "--device", "sim"], check=True, capture_output=True)
    body = {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": list(ids.shape),
                        "data": ids.reshape(-1).tolist()}]}
    return repo, body, ember_torch.read_safetensors(fout)


def right(text, expected):
    reply = json.loads(text)
    got = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in reply["outputs"]}
    for name, want in expected.items():
        if name not in got or got[name].shape != want.shape:
            return False
        if float(np.max(np.abs(got[name] - want))) > 1e-4 * max(float(np.max(np.abs(want))), 1e-12):
            return False
    return True


def run_p(p, args, repo, body, expected, work):
    cfg = os.path.join(work, f"p{p}.yaml")
    with open(cfg, "w") as f:
        f.write(f"autoscale:\n  enabled: false\n  partition_stages: {max(p, 1)}\n"
                f"  partition_bandwidth: {args.rate.replace('gbit', 'Gbit/s').replace('mbit', 'Mbit/s')}\n"
                f"  completion_rate: {args.completion_rate}\n")
    state = os.path.join(work, f"cluster-p{p}")
    netns(["down", "--dir", state], args.ember, check=False)
    up = netns(["up", str(NODES), "--rate", args.rate, "--repository-rate", args.repository_rate, "--mtu", "9000",
                "--config", cfg, "--repository", repo, "--dir", state, "--", "--device-memory", "6GiB",
                "--cache", "6GiB"], args.ember, check=False)
    if up.returncode != 0:
        raise RuntimeError("netns-cluster up failed: " + up.stderr[-2000:])
    try:
        if p >= 2:
            # A cluster that has been up a while: the manager built the model's plan tables after its
            # scan (on its plan queue); the scale-up then only looks its plan up.
            log_path = os.path.join(state, "manager.log")
            deadline = time.time() + 120
            while "partition plan tables of" not in open(log_path).read():
                if time.time() > deadline:
                    raise RuntimeError("the manager built no plan tables within 120 s")
                time.sleep(0.2)
        t0 = time.time()
        status, text = http_req("POST", f"/v2/repository/models/{MODEL}/load", {"parameters": {"replicas": p}},
                                timeout=600)
        if status != 200:
            raise RuntimeError(f"load: HTTP {status}: {text}")
        loaded = time.time() - t0
        samples = []  # (sent, latency, ok, full replicas at send)
        first = None
        switched = None
        deadline = None
        replicas_now = 0.0
        last_poll = 0.0
        while True:
            now = time.time()
            if now - last_poll > 0.5:
                replicas_now = full_replicas()
                last_poll = now
                if switched is None and replicas_now >= p:
                    switched = now - t0
                    deadline = now + 10
            if deadline and now > deadline:
                break
            if now - t0 > 600:
                raise RuntimeError("no full replicas after 600 s")
            sent = time.time()
            try:
                status, text = http_req("POST", f"/v2/models/{MODEL}/infer", body, timeout=120)
                ok = status == 200 and right(text, expected)
            except (OSError, http.client.HTTPException):
                ok = False
            done = time.time()
            samples.append((sent - t0, done - sent, ok, replicas_now))
            if ok and first is None:
                first = done - t0
        through_pipeline = pipelined()
        log = open(os.path.join(state, "manager.log")).read()
        m = re.search(MODEL + r"/1 serves through a pipeline: (.*)", log)
        return {"p": p, "load_s": loaded, "first_s": first, "switched_s": switched, "samples": samples,
                "pipelined": through_pipeline, "pipeline": m.group(1).strip() if m else ""}
    finally:
        netns(["down", "--dir", state], args.ember, check=False)


def median(xs):
    return float(np.median(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--p", default="1,2,4")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--repository-rate", default="10gbit")
    ap.add_argument("--work", default="/var/tmp/ember-partition-bench")
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--completion-rate", default="50MB/s",
                    help="autoscale.completion_rate: the members' background fetch (0 = the link's rate)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces): sudo bench/partition_bench.py")
    os.makedirs(args.work, exist_ok=True)
    repo, body, expected = make_model(args.ember, args.work, args.seq_len)
    results = []
    for p in [int(x) for x in args.p.split(",")]:
        print(f"p = {p} ...", flush=True)
        r = run_p(p, args, repo, body, expected, args.work)
        results.append(r)
        s = r["samples"]
        print(f"  load answered {r['load_s']:.2f} s, first answer {r['first_s']:.2f} s, {p} full replicas "
              f"{r['switched_s']:.2f} s; {len(s)} requests, {sum(1 for x in s if not x[2])} wrong or lost; "
              f"{r['pipelined']:.0f} through the pipeline {r['pipeline']}", flush=True)
    c1 = next((r["first_s"] for r in results if r["p"] == 1), None)
    print()
    print("| p | first answer C(p) s | C(1)/p s | C(p) / (C(1)/p) | pipeline latency ms (median) | full replica ms (median) "
          "| pipeline penalty | p full replicas after s | requests | wrong or lost |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        p, s = r["p"], r["samples"]
        # Before the switch-over requests go through the pipeline (p >= 2); afterwards to replicas.
        cut = r["switched_s"] or float("inf")
        pipe = [x[1] * 1e3 for x in s if x[2] and x[0] + x[1] < cut and p >= 2]
        full = [x[1] * 1e3 for x in s if x[2] and x[0] > cut]
        ideal = c1 / p if c1 else float("nan")
        ratio = r["first_s"] / ideal if c1 else float("nan")
        penalty = f"{(median(pipe) / median(full) - 1) * 100:+.0f}%" if pipe and full else "-"
        print(f"| {p} | {r['first_s']:.2f} | {ideal:.2f} | {ratio:.2f} | {median(pipe):.0f} | {median(full):.0f} | "
              f"{penalty} | {r['switched_s']:.2f} | {len(s)} | {sum(1 for x in s if not x[2])} |")
    print()
    for r in results:
        per_second = {}
        for sent, lat, ok, _ in r["samples"]:
            if ok:
                per_second[int(sent + lat)] = per_second.get(int(sent + lat), 0) + 1
        span = max(per_second) + 1 if per_second else 0
        print(f"p = {r['p']}: answers per second from the load request on: " +
              " ".join(str(per_second.get(t, 0)) for t in range(span)))
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
