#!/usr/bin/python3
"""Multi-process test (issue 15, "the manager may die"): a manager, two `ember node` processes and two
standalone `ember gateway` processes on loopback. A model is loaded with two replicas; four clients
(two per gateway) send requests back to back; the manager is killed with SIGKILL under that load and
restarted a few seconds later on the same address.

Checked: every warm request is answered right (compared with `ember run`), none refused or lost,
while the manager is away too (the gateways serve from their last routing table, over direct
connections to the nodes); the gateways say they lost the manager (ember_gateway_manager_connected
0) and answer repository commands with a clear 503 meanwhile; a request for a cold model sent while
the manager is away is held and answered once it is back; the restarted manager rebuilt its replica
table from the nodes that rejoined it (the model is ready without a new load), and the gateways
reconnected and subscribed again.

Usage: manager_restart_test.py --ember PATH [--outage 4]
"""
import argparse
import http.client
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import (Failure, Load, check_answer, free_port, make_cases, metric, node_replicas,  # noqa: E402
                          request, run_guarded, wait_for)

CONFIG = """
manager:
  recovery_window: 2s
autoscale:
  enabled: false
node:
  rejoin_interval: 250ms
gateway:
  reconnect_interval: 250ms
  cold_start_timeout: 30s
"""


def _body(ember, outage, work, procs, logs):
    repo, cases = make_cases(ember, work)
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    mport = free_port()
    gports = [free_port(), free_port()]

    def spawn(name, args):
        logs[name] = open(os.path.join(work, name + ".log"), "a")
        procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

    def start_manager():
        spawn("manager", ["manager", "--config", config, "--listen", f"127.0.0.1:{mport}", "--repository", repo,
                          "--node-timeout", "2s"])

    def log_of(name):
        logs[name].flush()
        with open(os.path.join(work, name + ".log")) as f:
            return f.read()

    start_manager()
    for i in (1, 2):
        spawn(f"node{i}", ["node", "--config", config, "--manager", f"127.0.0.1:{mport}", "--name", f"node{i}",
                           "--device-memory", "512MiB", "--cache", "512MiB", "--threads", "1"])
    for i, port in enumerate(gports):
        spawn(f"gateway{i}", ["gateway", "--config", config, "--manager", f"127.0.0.1:{mport}", "--http",
                              f"127.0.0.1:{port}", "--node-timeout", "2s"])
    for port in gports:
        wait_for("a gateway", lambda: request(port, "GET", "/v2/health/ready")[0] == 200, 30)
        wait_for("two nodes", lambda: len(node_replicas(port)) == 2, 30)
    status, text = request(gports[0], "POST", "/v2/repository/models/mlp/load", {"parameters": {"replicas": 2}})
    if status != 200:
        raise Failure(f"load mlp: HTTP {status} {text}")
    for port in gports:
        wait_for("mlp ready at both gateways",
                 lambda: request(port, "GET", "/v2/models/mlp/ready")[0] == 200, 30)
    for port in gports:
        wait_for("direct connections to both nodes",
                 lambda: log_of(f"gateway{gports.index(port)}").count("directly") >= 2, 30)

    load = Load(cases, "mlp", gports, 2)
    time.sleep(2.0)

    procs["manager"].send_signal(signal.SIGKILL)
    procs["manager"].wait()
    killed = time.time()
    print(f"killed the manager after {load.count('ok')} requests")
    for port in gports:
        wait_for("the gateway to notice", lambda: metric(port, "ember_gateway_manager_connected") == 0, 10)
    status, text = request(gports[1], "POST", "/v2/repository/index")
    if status != 503 or "unreachable" not in text:
        raise Failure(f"a repository command without a manager: HTTP {status} {text}")
    # A cold model asked for while the manager is away: held, then served once it is back.
    cold = {}

    def cold_request():
        body, expected = cases["bert"][0]
        try:
            s, t = request(gports[1], "POST", "/v2/models/bert/infer", body, timeout=60)
            cold["outcome"] = check_answer(s, t, expected)
        except (Failure, OSError, http.client.HTTPException) as e:
            cold["outcome"] = f"failed: {e}"
        cold["at"] = time.time()

    cold_thread = threading.Thread(target=cold_request)
    cold_thread.start()
    time.sleep(max(0.0, outage - (time.time() - killed)))
    served_away = load.count("ok", after=killed)

    start_manager()
    restarted = time.time()
    for port in gports:
        wait_for("the gateway to reconnect", lambda: metric(port, "ember_gateway_manager_connected") == 1, 20)
    reconnected = time.time()

    def second_life():
        log = log_of("manager")
        return log[log.rfind("model version(s)"):]  # the restarted manager's lines

    wait_for("both nodes to rejoin", lambda: all(f"node {n} joined" in second_life() for n in ("node1", "node2")),
             30)
    time.sleep(3.0)  # past the recovery window: the gateways hold the rebuilt table
    load.stop()
    cold_thread.join(timeout=60)

    counts = {"ok": load.count("ok"), "retryable": load.count("retryable")}
    failures = load.failures
    served_after = load.count("ok", after=reconnected)
    print(f"{counts['ok'] + counts['retryable']} warm requests: {counts['ok']} correct, {counts['retryable']} refused, "
          f"{len(failures)} failures; {served_away} answered while the manager was away "
          f"({restarted - killed:.1f} s), {served_after} after the gateways reconnected "
          f"({reconnected - restarted:.1f} s after the restart); cold request: {cold.get('outcome')} "
          f"{cold.get('at', 0) - restarted:.1f} s after the restart")
    if failures:
        raise Failure(f"{len(failures)} warm requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
    if counts["retryable"]:
        raise Failure(f"{counts['retryable']} warm requests were refused")
    if served_away < 10:
        raise Failure(f"only {served_away} warm requests were answered while the manager was away")
    if served_after < 1:
        raise Failure("no warm request was answered after the gateways reconnected")
    if cold.get("outcome") != "ok":
        raise Failure(f"the cold request sent while the manager was away: {cold.get('outcome')}")
    for i in range(len(gports)):  # the manager defers them, unless they come after its recovery window
        if "subscribing (serving from the last routing table" not in log_of(f"gateway{i}"):
            raise Failure(f"gateway{i} did not resubscribe with its table")
    for port in gports:
        status, _ = request(port, "GET", "/v2/models/mlp/ready")
        if status != 200:
            raise Failure(f"mlp is not ready at gateway :{port} after the restart (HTTP {status})")


def run(ember, outage):
    return run_guarded("ember-manager-restart-", lambda work, procs, logs: _body(ember, outage, work, procs, logs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--outage", type=float, default=4.0)
    args = ap.parse_args()
    return run(args.ember, args.outage)


if __name__ == "__main__":
    sys.exit(main())
