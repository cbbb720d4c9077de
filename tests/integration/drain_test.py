#!/usr/bin/python3
"""Scenario (issue 15): a node drained from the console under load, then stopped, loses no request.

A manager (with the HTTP gateway) and three `ember node` processes on loopback; a model loaded with two
replicas; four clients send requests back to back. `ember console -c "drain NODE"` drains a node that
holds a replica: its replica leaves the routing table, a replacement comes up elsewhere, and the
command answers once the node holds nothing; the node is then stopped (SIGTERM) while the load goes
on. Every request must be answered right (compared with `ember run`), none refused or lost, and two
replicas must serve at the end, none on the drained node.

Usage: drain_test.py --ember PATH
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import (Failure, Load, free_port, make_cases, node_replicas, request, run_guarded,  # noqa: E402
                          wait_for)


def _body(ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write("drain-scenario-token\n")
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write(f"manager:\n  admin_token_file: {token}\n")
    mport, hport = free_port(), free_port()
    manager = f"127.0.0.1:{mport}"

    def spawn(name, args):
        logs[name] = open(os.path.join(work, name + ".log"), "w")
        procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

    spawn("manager", ["manager", "--config", config, "--listen", manager, "--repository", repo, "--http", f"127.0.0.1:{hport}",
                      "--node-timeout", "2s"])
    wait_for("the gateway", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 20)
    for i in (1, 2, 3):
        spawn(f"node{i}", ["node", "--manager", manager, "--name", f"node{i}", "--device-memory", "512MiB",
                           "--cache", "512MiB", "--threads", "1"])
    wait_for("three nodes", lambda: len(node_replicas(hport)) == 3, 30)
    status, text = request(hport, "POST", "/v2/repository/models/mlp/load", {"parameters": {"replicas": 2}})
    if status != 200:
        raise Failure(f"load mlp: HTTP {status} {text}")
    wait_for("two replicas", lambda: sum(node_replicas(hport).values()) == 2, 30)
    victim = next(n for n, r in node_replicas(hport).items() if r > 0)

    load = Load(cases, "mlp", [hport], 4)
    time.sleep(2.0)
    started = time.time()
    drained = subprocess.run([ember, "--log-level", "warn", "console", "--manager", manager, "--token-file", token,
                              "-c", f"drain {victim}"],
                             capture_output=True, text=True, timeout=120)
    took = time.time() - started
    if drained.returncode != 0 or f"node {victim} is drained (moved mlp/1)" not in drained.stdout:
        raise Failure(f"drain {victim}: rc {drained.returncode}: {drained.stdout} {drained.stderr}")
    procs[victim].send_signal(signal.SIGTERM)
    procs[victim].wait(timeout=30)
    time.sleep(2.0)
    load.stop()
    after = node_replicas(hport)
    ok, refused, failures = load.count("ok"), load.count("retryable"), load.failures
    print(f"{ok} correct, {refused} refused, {len(failures)} failures; drain of {victim} "
          f"answered after {took:.1f} s, then the node was stopped; replicas now {after}")
    if failures:
        raise Failure(f"{len(failures)} requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
    if refused:
        raise Failure(f"{refused} requests were refused")
    if sum(after.values()) != 2 or victim in after:
        raise Failure(f"expected two replicas on the other nodes, got {after}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ember = ap.parse_args().ember
    return run_guarded("ember-drain-", lambda work, procs, logs: _body(ember, work, procs, logs))


if __name__ == "__main__":
    sys.exit(main())
