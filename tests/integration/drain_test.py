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
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import Failure, Load, LocalCluster, make_cases, node_replicas, run_guarded, wait_for  # noqa: E402


def _body(ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    cluster = LocalCluster(ember, work, procs, logs, repo, 3, manager_args=["--node-timeout", "2s"])
    hport = cluster.http
    cluster.load("mlp", 2)
    wait_for("two replicas", lambda: sum(node_replicas(hport).values()) == 2, 30)
    victim = next(n for n, r in node_replicas(hport).items() if r > 0)

    load = Load(cases, "mlp", [hport], 4)
    time.sleep(2.0)
    started = time.time()
    rc, out, err = cluster.console(f"drain {victim}")
    took = time.time() - started
    if rc != 0 or f"node {victim} is drained (moved mlp/1)" not in out:
        raise Failure(f"drain {victim}: rc {rc}: {out} {err}")
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
