#!/usr/bin/python3
"""Multi-process autoscaling test: a manager (with the HTTP gateway) and four `ember node` processes on
loopback, one model and no `load`: the first request scales it from zero, a burst of concurrent
clients scales it up across the nodes, one node is killed with SIGKILL as soon as the manager decides
the scale-up (the scale-up completes on the others), silence scales it down to zero, and the next
request brings it back from a node's host cache.

Every request must succeed with the right output (compared with `ember run` on the same input): none
lost, none refused. The scaling policy is requests_per_minute (600 per replica, at most 4 replicas) so
that the replica count a burst needs does not depend on how fast this machine runs the model.

Usage: autoscale_test.py --ember PATH [--clients 6] [--burst-seconds 6]
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import ember_torch  # noqa: E402
from cluster_test import (KSERVE, Failure, check_answer, free_port, metric, node_replicas,  # noqa: E402
                          print_log_tails, request, stop_all, wait_for)

CONFIG = """
autoscale:
  interval: 250ms
  look_back: 2s
  drain_timeout: 5s
  policy: requests_per_minute
  target_requests_per_minute: 600
  max_replicas: 4
  upscale_delay: 0
  downscale_delay: 2s
  idle_timeout: 3s
"""


def make_case(ember, work):
    d = os.path.join(work, "repo", "mlp", "1")
    subprocess.run([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "21", "--out", d],
                   check=True, capture_output=True)
    inputs = ember_torch.random_inputs("mlp", True, batch=2, seq_len=4, seed=2100)
    fin, fout = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    ember_torch.write_safetensors(fin, inputs.items())
    subprocess.run([ember, "--log-level", "warn", "run", d, "--input", fin, "--output", fout, "--repeat", "0",
                    "--device", "sim", "--threads", "1"], check=True, capture_output=True)
    body = {"inputs": [{"name": n, "datatype": KSERVE[a.dtype], "shape": list(a.shape),
                        "data": a.reshape(-1).tolist()} for n, a in inputs.items()]}
    return os.path.join(work, "repo"), body, ember_torch.read_safetensors(fout)


def replicas(port):
    return metric(port, "ember_replicas")


def run(ember, clients, burst_seconds):
    work = tempfile.mkdtemp(prefix="ember-autoscale-")
    procs, logs = {}, {}
    try:
        repo, body, expected = make_case(ember, work)
        config = os.path.join(work, "ember.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        mport, hport = free_port(), free_port()

        def spawn(name, args):
            logs[name] = open(os.path.join(work, name + ".log"), "w")
            procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

        def manager_log():
            logs["manager"].flush()
            with open(os.path.join(work, "manager.log")) as f:
                return f.read()

        spawn("manager", ["manager", "--config", config, "--listen", f"127.0.0.1:{mport}", "--repository", repo,
                          "--http", f"127.0.0.1:{hport}", "--node-timeout", "2s", "--cold-start-timeout", "20s"])
        wait_for("the gateway", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 20)
        for i in (1, 2, 3, 4):
            spawn(f"node{i}", ["node", "--manager", f"127.0.0.1:{mport}", "--name", f"node{i}", "--device-memory",
                               "512MiB", "--cache", "512MiB", "--threads", "1"])
        wait_for("four nodes", lambda: len(node_replicas(hport)) == 4, 30)

        outcomes = {"ok": 0}
        failures = []
        lock = threading.Lock()

        def infer(conn):
            try:
                conn.request("POST", "/v2/models/mlp/infer", body=json.dumps(body),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                check_answer(r.status, r.read().decode(), expected)  # raises unless right
                if r.status != 200:
                    raise Failure(f"HTTP {r.status}: refused")
                with lock:
                    outcomes["ok"] += 1
                return True
            except (Failure, OSError, http.client.HTTPException) as e:
                with lock:
                    failures.append(f"{type(e).__name__}: {e}")
                return False

        # 1. From zero: one request, one replica.
        conn = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
        if not infer(conn):
            raise Failure(f"the first request failed: {failures}")
        print("after the first request:", replicas(hport), "replica(s)")

        # 2. A burst; the node that gets a replica first in the scale-up's chain is killed as soon as
        # the manager logs the decision.
        stop = threading.Event()
        killed = []

        def client():
            c = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
            while not stop.is_set():
                if not infer(c):
                    c = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
            c.close()

        def killer():
            deadline = time.time() + burst_seconds
            while time.time() < deadline and not killed:
                m = re.search(r"transfer \d+ of mlp/1 \([^)]*\): \S+ -> (node\d)", manager_log())
                if m:
                    os.kill(procs[m.group(1)].pid, signal.SIGKILL)
                    killed.append(m.group(1))
                    print(f"killed {m.group(1)} as the scale-up's chain started")
                    return
                time.sleep(0.02)

        start = time.time()
        threads = [threading.Thread(target=client) for _ in range(clients)] + [threading.Thread(target=killer)]
        for t in threads:
            t.start()
        time.sleep(burst_seconds)
        peak = replicas(hport)
        stop.set()
        for t in threads:
            t.join(timeout=120)
            if t.is_alive():
                raise Failure("a client is still waiting after 120 s: a request hangs")
        rate = outcomes["ok"] / (time.time() - start)
        print(f"burst: {outcomes['ok']} correct answers ({rate:.0f}/s), {len(failures)} failures, "
              f"{peak:.0f} replicas at its end")
        if failures:
            raise Failure(f"{len(failures)} requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
        if not killed:
            raise Failure("the scale-up never started a chain, so no node was killed")
        if peak != 3:
            raise Failure(f"{peak:.0f} replicas after the burst; want 3 (4 wanted, one node killed)")
        log = manager_log()
        if "autoscale mlp/1: up" not in log:
            raise Failure("the manager logged no scale-up")

        # 3. Silence: down to zero (idle_timeout 3 s after the 2 s window empties, then the drain).
        wait_for("the idle model to scale to zero", lambda: replicas(hport) == 0, 30)
        log = manager_log()
        if "(idle)" not in log or "unbound after draining" not in log:
            raise Failure("the manager logged no idle scale-down and drain")
        if metric(hport, "ember_autoscale_actions_total", model="mlp", direction="down", reason="idle") < 1:
            raise Failure("ember_autoscale_actions_total counts no idle scale-down")

        # 4. Back from zero, from a node's host cache.
        if not infer(http.client.HTTPConnection("127.0.0.1", hport, timeout=60)):
            raise Failure(f"the request after scale-to-zero failed: {failures}")
        last = re.findall(r"replica mlp/1 ready on node \S+ \([^;]*; bytes from (\S+?)[,)]", manager_log())
        print("sources of the replicas, in order:", last)
        if not last or last[-1] != "cache":
            raise Failure(f"the replica after scale-to-zero came from {last[-1] if last else '?'}, not the cache")
        if metric(hport, "ember_replica_cold_starts_total", tier="cache") < 1:
            raise Failure("ember_replica_cold_starts_total counts no cold start from the cache")
        for line in manager_log().splitlines():
            if "autoscale" in line or "transfer" in line or "lost" in line or "unbound" in line:
                print("  manager:", line.split("] ", 2)[-1])
        print("PASS")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        print_log_tails(work, logs, 20)
        return 1
    finally:
        stop_all(procs, work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--burst-seconds", type=float, default=6)
    args = ap.parse_args()
    return run(args.ember, args.clients, args.burst_seconds)


if __name__ == "__main__":
    sys.exit(main())
