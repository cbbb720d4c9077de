#!/usr/bin/python3
"""Chaos benchmark (not a timed test; issue 15): bounded load on a loopback cluster while a seeded nemesis
injects faults, actor level (from the console, through the manager) and process level (signals).

A manager with the HTTP gateway (request timeout 2 s, node timeout 2 s) and --nodes `ember node
--allow-faults` processes on loopback; mlp and bert loaded with two replicas each. --clients threads send
requests back to back for --seconds (alternating the two models, every answer checked against `ember run`),
while the nemesis, every --interval seconds (jittered), injects the next fault kind (each kind once per
round, rounds in a seeded order) into a node holding a replica (random.Random(--seed): the same seed
replays the same sequence of faults and victims):
  kill-executor, kill-router,       console `fault NODE kill ...` (the node's supervisor restarts it)
  kill-cache
  fault-kernel                      the executor's next run faults (late binding retries, restarts it)
  delay-router, drop-router         an interposer on the router for 2 s (delay 3 s each / drop p=0.3)
  duplicate-router                  every message to the router twice, for 2 s
  stop-heartbeats                   the node's router answers no heartbeat for 3 s (a hang without a
                                    crash: the manager drops it, then takes it back)
  sigstop-node                      SIGSTOP for 3 s, past the node timeout, then SIGCONT
  sigkill-node                      SIGKILL, then the node is started again (empty cache)
Per fault it measures the time to detect (the node's restart counter moves; for a hung or killed node, the
manager no longer counts it, as `ember console --json -c nodes` shows) and to recover (the node runs requests again; for a killed node, the
models are back to two replicas), polling the gateway's /metrics every 100 ms.

Printed: requests sent, answered right, retryable errors (503/504), wrong and lost (no answer: the
targets are 0); p50/p99 latency of requests that started inside a fault's window (from injection to
recovery) and outside; a table per fault kind (count, detect and recover median and max). With --json,
the same as JSON.

  bench/chaos.py [--ember build/bin/ember] [--seconds 60] [--clients 6] [--nodes 4] [--interval 4]
                 [--seed 1] [--json FILE] [--work DIR]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from cluster_test import (Load, LocalCluster, make_cases, metric, node_replicas,  # noqa: E402
                          wait_for)

KINDS = ["kill-executor", "kill-router", "kill-cache", "fault-kernel", "delay-router", "drop-router", "duplicate-router",
         "stop-heartbeats", "sigstop-node", "sigkill-node"]
POLL_S = 0.1
RECOVERY_LIMIT_S = 30.0


def percentile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--interval", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--work")
    a = ap.parse_args()
    ember = os.path.abspath(a.ember)
    work = a.work or tempfile.mkdtemp(prefix="ember-chaos-")
    os.makedirs(work, exist_ok=True)
    procs, logs = {}, {}
    try:
        result = run(a, ember, work, procs, logs)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if result["lost"] == 0 and result["wrong"] == 0 else 1


def run(a, ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    cases = {m: cases[m] for m in ("mlp", "bert")}
    cluster = LocalCluster(ember, work, procs, logs, repo, a.nodes,
                           config="gateway:\n  request_timeout: 2s\n  cold_start_timeout: 2s\n"
                           "autoscale:\n  enabled: false\n",
                           node_args=["--allow-faults", "--node-timeout", "2s"], manager_args=["--node-timeout", "2s"])
    hport = cluster.http
    for model in cases:
        cluster.load(model, 2)
    wait_for("four replicas", lambda: sum(node_replicas(hport).values()) == 4, 60)

    def console(command):
        rc, out, err = cluster.console(command)
        return rc == 0, (out + err).strip()

    def members():
        """The nodes the manager counts now (`ember console --json -c nodes`)."""
        r = subprocess.run([ember, "--log-level", "warn", "console", "--manager", cluster.manager, "--json", "-c",
                            "nodes"], capture_output=True, text=True, timeout=30)
        return {n["name"] for n in json.loads(r.stdout)} if r.returncode == 0 else set()

    def poll_until(predicate, limit=RECOVERY_LIMIT_S):
        """Seconds from the fault's injection (t0) until predicate() holds (polled), or None past `limit`."""
        started = time.time()
        while time.time() - started < limit:
            try:
                if predicate():
                    return time.time() - t0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(POLL_S)
        return None

    rng = random.Random(a.seed)
    faults = []
    clients = Load(cases, list(cases), [hport], a.clients)
    end = time.time() + a.seconds
    time.sleep(min(2.0, a.interval))
    order = []
    while time.time() + a.interval / 2 < end:
        if not order:  # every kind once per round, in a seeded order
            order = rng.sample(KINDS, len(KINDS))
        kind = order.pop()
        held = sorted(n for n, r in node_replicas(hport).items() if r > 0)
        if not held:
            time.sleep(POLL_S)
            continue
        victim = rng.choice(held)
        runs = lambda: metric(hport, "ember_compute_duration_seconds_count", node=victim)  # noqa: E731
        restarts = lambda actor: metric(hport, "ember_actor_restarts_total", node=victim, actor=actor)  # noqa
        t0 = time.time()  # poll_until counts from here
        detect = None
        note = ""
        if kind in ("kill-executor", "kill-router", "kill-cache"):
            actor = kind.split("-")[1]
            before = restarts(actor)
            ok, note = console(f"fault {victim} kill {'executor:0' if actor == 'executor' else actor}")
            before_runs = runs()  # once the fault is in
            detect = poll_until(lambda: restarts(actor) > before)
            recover = poll_until(lambda: runs() > before_runs)
        elif kind == "fault-kernel":
            before = metric(hport, "ember_executor_restarts_total", node=victim)
            ok, note = console(f"fault {victim} fault-kernel executor:0")
            before_runs = runs()
            detect = poll_until(lambda: metric(hport, "ember_executor_restarts_total", node=victim) > before)
            recover = poll_until(lambda: runs() > before_runs)
        elif kind.endswith("-router"):
            what = {"delay-router": "delay router delay=3s for=2s", "drop-router": "drop router p=0.3 for=2s",
                    "duplicate-router": "duplicate router for=2s"}[kind]
            ok, note = console(f"fault {victim} {what} seed={rng.randrange(1 << 30)}")
            time.sleep(2.0)
            mark = runs()
            recover = poll_until(lambda: runs() > mark)
        elif kind == "stop-heartbeats":
            ok, note = console(f"fault {victim} stop-heartbeats for=3s")
            detect = poll_until(lambda: victim not in members(), 4.0)
            recover = poll_until(lambda: victim in node_replicas(hport) and sum(node_replicas(hport).values()) >= 4)
        elif kind == "sigstop-node":
            ok = True
            procs[victim].send_signal(signal.SIGSTOP)
            detect = poll_until(lambda: victim not in members(), 3.0)
            time.sleep(max(0.0, 3.0 - (time.time() - t0)))
            procs[victim].send_signal(signal.SIGCONT)
            recover = poll_until(lambda: victim in node_replicas(hport) and sum(node_replicas(hport).values()) >= 4)
        else:  # sigkill-node
            ok = True
            procs[victim].kill()
            procs[victim].wait()
            detect = poll_until(lambda: victim not in members())
            cluster.spawn_node(victim)
            recover = poll_until(lambda: victim in node_replicas(hport) and sum(node_replicas(hport).values()) >= 4)
        faults.append({"kind": kind, "node": victim, "at": t0, "injected": ok, "detect_s": detect,
                       "recover_s": recover, "note": note})
        print(f"  {time.time() - end + a.seconds:6.1f} s  {kind:<17} on {victim}: detect "
              f"{'-' if detect is None else f'{detect:.2f} s'}, recover "
              f"{'-' if recover is None else f'{recover:.2f} s'}{'' if ok else ' (NOT INJECTED: ' + note + ')'}",
              flush=True)
        rest = a.interval * rng.uniform(0.5, 1.5) - (time.time() - t0)
        if rest > 0:
            time.sleep(min(rest, max(0.0, end - time.time())))
    time.sleep(max(0.0, end - time.time()))  # the load runs for --seconds
    clients.stop()

    windows = [(f["at"], f["at"] + (f["recover_s"] if f["recover_s"] is not None else RECOVERY_LIMIT_S))
               for f in faults]
    inside, outside = [], []
    for start, stop, outcome in clients.records:
        if outcome != "ok":
            continue
        (inside if any(lo <= start <= hi for lo, hi in windows) else outside).append((stop - start) * 1e3)
    count = {o: sum(1 for r in clients.records if r[2] == o) for o in ("ok", "retryable", "wrong", "lost")}
    per_kind = {}
    for k in KINDS:
        fs = [f for f in faults if f["kind"] == k]
        if not fs:
            continue
        det = [f["detect_s"] for f in fs if f["detect_s"] is not None]
        rec = [f["recover_s"] for f in fs if f["recover_s"] is not None]
        per_kind[k] = {"count": len(fs), "not_recovered": len(fs) - len(rec),
                       "detect_median_s": statistics.median(det) if det else None,
                       "detect_max_s": max(det) if det else None,
                       "recover_median_s": statistics.median(rec) if rec else None,
                       "recover_max_s": max(rec) if rec else None}
    result = {"seconds": a.seconds, "clients": a.clients, "nodes": a.nodes, "seed": a.seed,
              "sent": len(clients.records), "right": count["ok"], "retryable": count["retryable"],
              "wrong": count["wrong"], "lost": count["lost"],
              "p50_inside_ms": percentile(inside, 0.5), "p99_inside_ms": percentile(inside, 0.99),
              "p50_outside_ms": percentile(outside, 0.5), "p99_outside_ms": percentile(outside, 0.99),
              "faults": faults, "per_kind": per_kind}

    def s(x):
        return "-" if x is None else f"{x:.2f}"

    print(f"\n{a.seconds:.0f} s, {a.clients} clients, {a.nodes} nodes, seed {a.seed}, {len(faults)} faults")
    print(f"requests: {result['sent']} sent, {result['right']} right, {result['retryable']} retryable errors, "
          f"{result['wrong']} wrong, {result['lost']} lost")
    print(f"latency of right answers: inside fault windows p50 {result['p50_inside_ms']:.1f} ms, "
          f"p99 {result['p99_inside_ms']:.1f} ms ({len(inside)}); outside p50 {result['p50_outside_ms']:.1f} ms, "
          f"p99 {result['p99_outside_ms']:.1f} ms ({len(outside)})")
    print("| fault | count | detect median / max (s) | recover median / max (s) | not recovered |")
    print("|---|---|---|---|---|")
    for k, v in per_kind.items():
        print(f"| {k} | {v['count']} | {s(v['detect_median_s'])} / {s(v['detect_max_s'])} | "
              f"{s(v['recover_median_s'])} / {s(v['recover_max_s'])} | {v['not_recovered']} |")
    for w in clients.failures[:5]:
        print("failed: " + w)
    return result


if __name__ == "__main__":
    sys.exit(main())
