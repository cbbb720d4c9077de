#!/usr/bin/python3
"""Scenarios (issue 15): actor-level faults injected from the console into a live cluster under load.

A manager (with the HTTP gateway; request timeout 1 s) and three `ember node --allow-faults` processes on
loopback; a model loaded with two replicas; four clients send requests back to back, every answer checked
against `ember run`. One after the other, on a node holding a replica:
  1. its executor is killed (the supervisor replaces it; the router restarts it and the model comes back
     from host memory);
  2. its router is killed (restarted behind the same address, replicas restored from the ledger);
  3. its model cache is killed (restarted over the bytes it held; the router pins its replicas' again);
  4. every message to its router is delayed 2 s for 3 s (an interposer), past the gateway's timeout;
  5. the node is hung (SIGSTOP) for 3 s, past the manager's node timeout, then resumed.
Checked: every request got exactly one answer, the right output or a retryable error (503/504), none lost
or wrong; after each fault the node serves again (its executor runs requests) within a stated bound; the
node's metrics count the fault and the restart. Prints, per fault, the time until the node served again.
Then a multicast chain of a 7 MiB model to two nodes, their hops held to ~2 MB/s, and every hop killed
mid-chain: each node's cache starts a new hop that goes on from its verified offset, and the chain
completes at both with the model's digest verified, within a stated bound. Last, a chain of a 98 MiB model (more
than the sockets buffer) from the repository, hops held to 20 MB/s, while the manager is killed
(SIGKILL) and restarted 2 s later on the same addresses: the first hop, without upstream or controller, tries the repository again every second and
resumes from its verified offset; both hops end with the digest verified.

With --standalone-gateway, another scenario (issue 33): node chaos through a standalone `ember gateway`,
which reaches the nodes directly and so cannot count on the manager's own view of them. Four nodes, mlp
with two replicas, four clients through the standalone gateway (its request timeout the default 60 s,
its cold-start timeout 5 s); every 3 s a node holding a replica is SIGKILLed (and started again) or
SIGSTOPped for 3 s (its connections live; nothing answers), six faults in all. Checked: no request hangs
(a client gives up after 15 s, far below the gateway's request timeout: a request in flight on a lost or
stopped node must be re-sent, or failed as retryable, once the manager drops the node) and none is
wrong. ~35 s.

Usage: faults_test.py --ember PATH [--standalone-gateway]
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import (Failure, Load, LocalCluster, make_cases, metric, node_replicas,  # noqa: E402
                          request, run_guarded, wait_for)
from ports import free_port  # noqa: E402

# A node must serve again within this long after each fault (the hung node: after it resumed).
RECOVERY_BOUND_S = 15.0


def _body(ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    cluster = LocalCluster(ember, work, procs, logs, repo, 3, config="gateway:\n  request_timeout: 1s\n"
                           "  cold_start_timeout: 1s\n", node_args=["--allow-faults", "--node-timeout", "2s"],
                           manager_args=["--node-timeout", "2s", "--data-listen", f"127.0.0.1:{free_port()}"])
    hport = cluster.http
    cluster.load("mlp", 2)
    wait_for("two replicas", lambda: sum(node_replicas(hport).values()) == 2, 30)

    def console(command):
        rc, out, err = cluster.console(command)
        if rc != 0:
            raise Failure(f"'{command}': rc {rc}: {out} {err}")
        return out

    def runs(node):
        return metric(hport, "ember_compute_duration_seconds_count", node=node)

    def served_again(node, since_runs, what):
        """Seconds until `node` ran a request again (its executor's count grows), within the bound."""
        started = time.time()
        wait_for(f"{node} to serve again after {what}", lambda: runs(node) > since_runs, RECOVERY_BOUND_S)
        return time.time() - started

    load = Load(cases, "mlp", [hport], 4)
    time.sleep(1.5)
    report = []
    for what in ("kill executor:0", "kill router", "kill cache", "delay router delay=2s for=3s seed=11"):
        victim = max(node_replicas(hport).items(), key=lambda kv: kv[1])[0]
        said = console(f"fault {victim} {what}")
        if "delay" in what:
            time.sleep(3.0)  # the interposer's window
        took = served_again(victim, runs(victim), what)  # runs counted once the fault is in
        report.append(f"{what} on {victim}: serving again after {took:.2f} s ({said.strip()})")
        time.sleep(1.0)
    for actor in ("executor", "router", "cache"):
        if metric(hport, "ember_actor_restarts_total", actor=actor) < 1:
            raise Failure(f"no {actor} restart was counted")
    if metric(hport, "ember_faults_injected_total", kind="delay") < 1:
        raise Failure("the delay fault was not counted")

    # A hung node (a hang without a crash), past the manager's node timeout, then resumed.
    victim = max(node_replicas(hport).items(), key=lambda kv: kv[1])[0]
    procs[victim].send_signal(signal.SIGSTOP)
    time.sleep(3.0)
    procs[victim].send_signal(signal.SIGCONT)
    started = time.time()
    wait_for(f"{victim} to rejoin", lambda: victim in node_replicas(hport), RECOVERY_BOUND_S)
    report.append(f"SIGSTOP of {victim} for 3 s: back in the cluster {time.time() - started:.2f} s after SIGCONT")
    time.sleep(1.5)
    load.stop()

    ok, retryable, failures = load.count("ok"), load.count("retryable"), load.failures

    # A chain to two nodes, every hop killed mid-transfer.
    subprocess.run([ember, "model", "new", "--arch", "mlp", "--seed", "5", "--out", os.path.join(repo, "big", "1")],
                   check=True, capture_output=True)
    receivers = cluster.names[:2]
    for n in receivers:
        console(f"fault {n} throttle hops rate=2MB/s for=3s")
    result = {}
    started = time.time()
    sender = threading.Thread(target=lambda: result.update(zip(("rc", "out", "err"),
                                                              cluster.console("distribute big " + " ".join(receivers)))))
    sender.start()
    time.sleep(1.0)
    for n in receivers:
        said = console(f"fault {n} kill hop")
        if "killed 1 multicast hop" not in said:
            raise Failure(f"kill hop on {n}: {said}")
    sender.join(60)
    took = time.time() - started
    if result.get("rc") != 0 or f"in the caches of {len(receivers)} node(s)" not in result.get("out", ""):
        raise Failure(f"the chain did not complete after its hops were killed: {result}")
    for n in receivers:
        if metric(hport, "ember_actor_restarts_total", node=n, actor="hop") < 1:
            raise Failure(f"no hop restart was counted on {n}")
    if took > RECOVERY_BOUND_S:
        raise Failure(f"the chain took {took:.1f} s with its hops killed (bound {RECOVERY_BOUND_S} s)")
    report.append(f"kill hop on {' and '.join(receivers)} mid-chain: the chain completed in {took:.2f} s "
                  f"({result['out'].strip().splitlines()[0]})")

    # A chain from the repository while the manager dies and comes back.
    subprocess.run([ember, "model", "new", "--arch", "resnet50", "--seed", "6", "--out",
                    os.path.join(repo, "big2", "1")], check=True, capture_output=True)
    receivers = cluster.names[1:]
    for n in receivers:
        console(f"fault {n} throttle hops rate=20MB/s for=10s")
    ended = {n: metric(hport, "ember_transfer_hops_total", node=n, outcome="ok") for n in receivers}
    # Its answer goes with the manager that dies; the console is stopped with the rest.
    procs["distribute"] = subprocess.Popen([ember, "--log-level", "warn", "console", "--manager", cluster.manager,
                                            "--token-file", cluster.token, "-c", "distribute big2 " + " ".join(receivers)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    started = time.time()
    cluster.restart_manager(2.0)
    wait_for("both hops of the chain to end with the digest verified",
             lambda: all(metric(hport, "ember_transfer_hops_total", node=n, outcome="ok") > ended[n] for n in receivers),
             RECOVERY_BOUND_S + 15)
    resumed = sum(metric(hport, "ember_transfer_resumes_total", node=n, reason="controller_away") for n in receivers)
    if resumed < 1:
        raise Failure("no hop resumed after the manager came back (ember_transfer_resumes_total{reason=controller_away})")
    report.append(f"manager killed mid-chain and restarted 2 s later: the chain completed {time.time() - started:.2f} s "
                  f"after the kill, {resumed:.0f} resume(s) of a hop whose controller was away")

    print(f"{ok} correct, {retryable} retryable errors, {len(failures)} lost or wrong")
    for line in report:
        print("  " + line)
    if failures:
        raise Failure(f"{len(failures)} requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
    if ok < 100:
        raise Failure(f"only {ok} requests answered right")


# A client waits this long for an answer before it counts its request as hung (the standalone gateway's
# request timeout is 60 s: a request it leaves on a lost node waits that long).
HUNG_S = 15.0


def _standalone_gateway_chaos(ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    cases = {"mlp": cases["mlp"]}
    cluster = LocalCluster(ember, work, procs, logs, repo, 4, config="autoscale:\n  enabled: false\n",
                           node_args=["--node-timeout", "2s"], manager_args=["--node-timeout", "2s"])
    hport = cluster.http
    cluster.load("mlp", 2)
    wait_for("two replicas", lambda: sum(node_replicas(hport).values()) == 2, 30)
    gw_config = os.path.join(work, "gateway.yaml")
    with open(gw_config, "w") as f:
        f.write("gateway:\n  cold_start_timeout: 5s\n")  # request_timeout: the default 60 s
    gport = free_port()
    cluster.spawn("gateway", ["gateway", "--manager", cluster.manager, "--http", f"127.0.0.1:{gport}", "--config",
                              gw_config])
    wait_for("the standalone gateway to serve mlp", lambda: request(gport, "POST", "/v2/models/mlp/infer",
                                                                    cases["mlp"][0][0], timeout=10)[0] == 200, 30)
    load = Load(cases, "mlp", [gport], 4, timeout=HUNG_S)
    time.sleep(1.0)
    faults = []
    for k in range(6):
        held = [n for n, r in node_replicas(hport).items() if r > 0 and procs[n].poll() is None]
        if not held:
            raise Failure(f"no node holds a replica of mlp before fault {k + 1}")
        victim = held[k % len(held)]
        if k % 2 == 0:
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            time.sleep(1.0)
            cluster.spawn_node(victim)  # empty cache, same name
            faults.append(f"SIGKILL {victim}")
            time.sleep(2.0)
        else:
            procs[victim].send_signal(signal.SIGSTOP)
            time.sleep(3.0)
            procs[victim].send_signal(signal.SIGCONT)
            faults.append(f"SIGSTOP {victim} 3 s")
        wait_for("mlp served from two replicas again", lambda: sum(node_replicas(hport).values()) >= 2, 30)
    time.sleep(1.0)
    load.stop()
    ok, retryable = load.count("ok"), load.count("retryable")
    longest = max(end - start for start, end, _ in load.records)
    print(f"standalone gateway under node chaos ({', '.join(faults)}): {ok} correct, {retryable} retryable, "
          f"{len(load.failures)} hung or wrong; the longest request took {longest:.2f} s")
    if load.failures:
        raise Failure(f"{len(load.failures)} requests hung (no answer in {HUNG_S:.0f} s) or wrong, e.g.: " +
                      "; ".join(load.failures[:5]))
    if ok < 100:
        raise Failure(f"only {ok} requests answered right")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--standalone-gateway", action="store_true",
                    help="node chaos through a standalone gateway instead of the console's faults")
    a = ap.parse_args()
    if a.standalone_gateway:
        return run_guarded("ember-faults-gw-",
                           lambda work, procs, logs: _standalone_gateway_chaos(a.ember, work, procs, logs))
    return run_guarded("ember-faults-", lambda work, procs, logs: _body(a.ember, work, procs, logs))


if __name__ == "__main__":
    sys.exit(main())
