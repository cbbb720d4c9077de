#!/usr/bin/python3
"""Multi-process test (issue 37, "a control plane that loses nothing"): the manager is killed (SIGKILL)
under load while decisions are under way, and started again over its state folder
(manager.state_dir). A manager with an admin token, four `ember node` processes (receiving at most
20 MB/s each) and a standalone `ember gateway` on loopback; two clients send warm requests for `mlp`
through the gateway the whole time, every answer checked against `ember run`.

Right before the kill, each acknowledged or started by the manager:
  - a scale-up: `load mlp 3` (two replicas serve; the floor becomes three);
  - an SLO set at run time: `slo mlp 80ms`;
  - a drain in progress: `drain NODE` of a node holding an mlp replica (its replica moving away);
  - a cold start with a chain in flight: `load big 2`, a 98 MiB model no node holds, sent from the
    manager's repository along a chain of two nodes (manager -> a -> b);
  - a cold request for `bert`, held by the gateway.

The manager is killed once the chain is under way and restarted 3 s later with the same command line
(same data-plane port, same state folder). Checked: no warm request lost, refused or wrong, before,
during or after; the cold request answered right; and no decision lost: mlp has three replicas, none
on the drained node; the drained node is still draining and holds nothing; mlp's SLO is the one set;
big has two ready replicas, their bytes verified; the chain's first hop went on from the restarted
manager's repository server at its own offset.

With --etcd the same runs with two managers sharing an etcd (manager.etcd, a 2 s lease; nodes, the
gateway and the console given both): the leader is killed and not restarted, and the standby takes
over with the decisions kept in etcd. There the chain's first hop cannot go on from the dead
leader's repository server: the new leader places big again and its two replicas must be ready, their
bytes verified. Skipped (77) without /usr/bin/etcd.

Usage: manager_decisions_test.py --ember PATH [--etcd]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import (Failure, Load, Spawner, check_answer, free_port, make_cases, request,  # noqa: E402
                          run_guarded, wait_for)

ETCD = "/usr/bin/etcd"
CONFIG = """
{keep}
  recovery_window: 2s
autoscale:
  enabled: false
node:
  rejoin_interval: 250ms
gateway:
  reconnect_interval: 250ms
  cold_start_timeout: 60s
transfer:
  progress_interval: 100ms
"""


def _body(ember, work, procs, logs, etcd):
    repo, cases = make_cases(ember, work)
    subprocess.run([ember, "model", "new", "--arch", "resnet50", "--seed", "5", "--out",
                    os.path.join(repo, "big", "1")], check=True, capture_output=True)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write("decisions-test-token\n")
    config = os.path.join(work, "ember.yaml")
    run = Spawner(ember, work, procs, logs)
    spawn, log_of = run.spawn, run.log
    eport = run.start_etcd(ETCD) if etcd else 0
    keep = (f"  etcd: 127.0.0.1:{eport}\n  etcd_prefix: /ember-decisions\n  lease_ttl: 2s" if etcd else
            f"  state_dir: {os.path.join(work, 'state')}")
    with open(config, "w") as f:
        f.write(f"manager:\n  admin_token_file: {token}\n" + CONFIG.format(keep=keep))
    # Each manager: listen, HTTP and data-plane ports; one ("manager") restarted, or two sharing etcd.
    ports = {name: (free_port(), free_port(), free_port()) for name in (("m1", "m2") if etcd else ("manager",))}
    manager = ",".join(f"127.0.0.1:{p[0]}" for p in ports.values())
    gport = free_port()

    def start_manager(name="manager"):
        mport, hport, dport = ports[name]
        spawn(name, ["manager", "--config", config, "--listen", f"127.0.0.1:{mport}", "--repository", repo, "--http",
                     f"127.0.0.1:{hport}", "--data-listen", f"127.0.0.1:{dport}", "--node-timeout", "2s"])

    def leader():
        """The manager process that serves now: the one, or the one of two that logged it leads last."""
        return run.leader(ports) if etcd else "manager"

    def serving(name):
        return name is not None and request(ports[name][1], "GET", "/v2/health/ready")[0] == 200

    def console(*commands, check=True):
        args = [a for c in commands for a in ("-c", c)]
        r = subprocess.run([ember, "--log-level", "warn", "console", "--json", "--manager", manager, "--token-file",
                            token, *args], capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise Failure(f"console {commands}: exit {r.returncode}: {r.stdout} {r.stderr}")
        return r.stdout

    def snapshot():
        """{"models": {name: state json}, "nodes": {name: node json}} from the console."""
        out = json.loads(console("nodes") or "[]"), json.loads(console("models") or "[]")
        nodes, models = out
        return {"nodes": {n["name"]: n for n in nodes}, "models": {m["name"]: m for m in models}}

    def replicas_of(model, snap):
        return sorted(n for n, v in snap["nodes"].items() if f"{model}/1" in v["replicas"])

    for name in ports:
        start_manager(name)
    wait_for("the manager", lambda: serving(leader()), 30)
    lead = leader()
    names = [f"node{i}" for i in (1, 2, 3, 4)]
    for n in names:
        spawn(n, ["node", "--config", config, "--manager", manager, "--name", n, "--device-memory", "1GiB",
                  "--cache", "1GiB", "--threads", "1", "--fault-receive-rate", "20MB/s"])
    spawn("gateway", ["gateway", "--config", config, "--manager", manager, "--http", f"127.0.0.1:{gport}",
                      "--node-timeout", "2s"])
    wait_for("the gateway", lambda: request(gport, "GET", "/v2/health/ready")[0] == 200, 30)
    wait_for("four nodes", lambda: len(snapshot()["nodes"]) == 4, 30)
    console("load mlp 2")
    wait_for("mlp ready at the gateway", lambda: request(gport, "GET", "/v2/models/mlp/ready")[0] == 200, 30)
    wait_for("the gateway's direct connections", lambda: log_of("gateway").count("directly") >= 4, 30)

    load = Load(cases, "mlp", [gport], 2)
    time.sleep(1.0)

    # The decisions, each kept before it is acted on.
    holders = replicas_of("mlp", snapshot())
    if len(holders) != 2:
        raise Failure(f"mlp should have two replicas before the decisions: {holders}")
    drained = holders[0]
    console("load mlp 3", "slo mlp 80ms")
    threading.Thread(target=lambda: console(f"drain {drained}", check=False), daemon=True).start()
    wait_for("the drain to start", lambda: f"draining node {drained}" in log_of(lead), 20)
    threading.Thread(target=lambda: console("load big 2", check=False), daemon=True).start()
    cold = {}

    def cold_request():
        body, expected = cases["bert"][0]
        try:
            s, t = request(gport, "POST", "/v2/models/bert/infer", body, timeout=90)
            cold["outcome"] = check_answer(s, t, expected)
        except (Failure, OSError, http.client.HTTPException) as e:
            cold["outcome"] = f"failed: {e}"

    cold_thread = threading.Thread(target=cold_request)
    cold_thread.start()
    wait_for("the chain of big", lambda: re.search(r"transfer \d+ of big/1 \(.*\): manager -> node\d -> node\d",
                                                   log_of(lead)), 20)
    chain = re.search(r"transfer \d+ of big/1 \(.*\): manager -> (node\d) -> (node\d)", log_of(lead))
    first_hop, second_hop = chain.group(1), chain.group(2)
    wait_for("the chain's first hop under way", lambda: re.search(r"node %s has .* of .* from manager" % first_hop,
                                                                  log_of(first_hop)), 20)

    procs[lead].kill()
    procs[lead].wait()
    killed = time.time()
    served_before = load.count("ok")
    if etcd:  # the standby takes over once etcd lets the lease expire
        wait_for("the standby to lead", lambda: leader() not in (None, lead), 30)
        lead = leader()
        wait_for("the new leader", lambda: serving(lead), 30)
    else:
        time.sleep(3.0)
        start_manager()
        wait_for("the restarted manager", lambda: serving(lead), 20)
    served_away = load.count("ok", after=killed)
    restarted = time.time()

    last = {}

    def settled():
        s = snapshot()
        big, mlp = replicas_of("big", s), replicas_of("mlp", s)
        last["seen"] = (f"{len(s['nodes'])} nodes, big on {big} ({s['models'].get('big', {}).get('state')}), "
                        f"mlp on {mlp}, {drained} draining={s['nodes'].get(drained, {}).get('draining')}")
        return (len(s["nodes"]) == 4 and len(big) == 2 and len(mlp) == 3 and drained not in big + mlp and
                s["models"].get("big", {}).get("state") == "ready")

    try:
        wait_for("the decisions to hold after the restart", settled, 90)
    except Failure as e:
        raise Failure(f"{e}; last seen: {last.get('seen')}")
    took = time.time() - restarted
    time.sleep(3.0)  # a replica placed twice would show by now (and leave after the settle time)
    wait_for("the decisions to hold still", settled, 30)
    load.stop()
    cold_thread.join(timeout=90)

    s = snapshot()
    failures, retryable = load.failures, load.count("retryable")
    print(f"{load.count('ok')} warm requests answered right ({served_before} before the kill, {served_away} while "
          f"the manager was away), {retryable} refused, {len(failures)} lost or wrong; cold request: "
          f"{cold.get('outcome')}; decisions held {took:.1f} s after the restart: mlp on {replicas_of('mlp', s)}, "
          f"big on {replicas_of('big', s)}, {drained} draining={s['nodes'][drained]['draining']}, mlp SLO "
          f"{s['models']['mlp']['slo_deadline_us']} us (set={s['models']['mlp']['slo_set']})")
    if failures:
        raise Failure(f"{len(failures)} warm requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
    if retryable:
        raise Failure(f"{retryable} warm requests were refused")
    if served_away < 10:
        raise Failure(f"only {served_away} warm requests were answered while the manager was away")
    if cold.get("outcome") != "ok":
        raise Failure(f"the cold request sent before the kill: {cold.get('outcome')}")
    if len(replicas_of("big", s)) != 2 or len(replicas_of("mlp", s)) != 3:
        raise Failure("placed twice and not reconciled: big on %s, mlp on %s" % (replicas_of("big", s),
                                                                             replicas_of("mlp", s)))
    if not s["nodes"][drained]["draining"] or s["nodes"][drained]["replicas"]:
        raise Failure(f"{drained} should still be draining and hold nothing: {s['nodes'][drained]}")
    mlp = s["models"]["mlp"]
    if mlp["slo_deadline_us"] != 80000 or not mlp["slo_set"]:
        raise Failure(f"mlp's SLO set at run time was lost: {mlp}")
    if etcd:  # the dead leader's repository server is gone: big was placed again by the new leader
        for n in replicas_of("big", s):  # a chain hop's digest, or a fetch's (every fetch checks it)
            if not re.search(r"node %s holds big/1 \(.* verified|model cache: big/1 resident" % n, log_of(n)):
                raise Failure(f"{n} serves big without having verified its bytes")
        return
    resumed = re.search(r"node %s: the chain controller is away .*; manager failed, trying manager in \d+ s from "
                        r"offset (\d+)" % first_hop, log_of(first_hop))
    if not resumed or int(resumed.group(1)) == 0:
        raise Failure(f"{first_hop} did not go on from the repository at its own offset:\n" + log_of(first_hop)[-2000:])
    for n in (first_hop, second_hop):
        if not re.search(r"node %s holds big/1 \(.* verified" % n, log_of(n)):
            raise Failure(f"{n} did not verify big's bytes from the chain")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--etcd", action="store_true", help="two managers sharing an etcd; the leader killed")
    args = ap.parse_args()
    if args.etcd and not shutil.which(ETCD):
        print(f"SKIPPED: {ETCD} is not installed (Debian's etcd-server; deploy/setup.sh installs it)")
        return 77
    return run_guarded("ember-manager-decisions-",
                       lambda work, procs, logs: _body(args.ember, work, procs, logs, args.etcd))


if __name__ == "__main__":
    sys.exit(main())
