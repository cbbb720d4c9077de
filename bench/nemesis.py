#!/usr/bin/python3
"""Network nemesis (issue 37; not a timed test): the network-namespace cluster (deploy/netns-cluster.sh:
the manager with its HTTP gateway in ember-h0, `ember node` in ember-h1..h3) and a standalone gateway
in ember-h1's namespace, under load from clients on both gateways, while a seeded nemesis cuts the
network between processes that stay alive, and stops processes, one fault at a time:

  node-from-manager   a node that holds replicas cannot reach the manager, nor it the node; the
                      standalone gateway (h1) still reaches it
  gateway-from-node   the standalone gateway's host (h1) and a node cannot reach each other; the
                      manager reaches both
  halves              {manager, h1} | {h2, h3}
  isolate-node        a node reaches nobody
  sigstop-node        a node's process stopped (SIGSTOP), then continued: a hang, not a cut
  sigkill-node        a node's process killed (SIGKILL), then started again in its namespace with
                      the same command line (an empty cache: its models come back from peers)
  kill-router,        the console's `fault NODE kill router|executor:0` (the nodes run with
  kill-executor       --allow-faults; the manager has an admin token): the node's supervisor restarts it
  loss-5pct, delay-200ms   tc netem on a node's link, where the kernel has netem (otherwise listed
                      as not run)

A cut is a blackhole route for the peer's address (/32) in each side's namespace (iproute2 only: no
firewall needed): packets to the peer are dropped silently, as a partition drops them. Each fault
lasts --fault seconds, then heals; the next comes once the cluster recovered (every node a member of
the manager's cluster again and a request for each model answered through each gateway) or after
--recovery-limit seconds. random.Random(--seed) orders the kinds each round and picks the victims:
the same seed replays the same faults.

Every answer is checked against `ember run`'s. Printed: a table per fault kind of requests started
from the injection to the recovery, answered right, retryable errors (503/504), lost (no answer in 60
s) and wrong (both must be 0), duplicates (not applicable: inference is idempotent and a client sends
each request once; the gateways' retries are counted by ember_request_retries_total), p99 latency, and
time to recover after the heal (median and max); then the totals. With --json, the same as JSON.
Exit status 1 when a request was wrong or lost, or a fault did not recover.

Needs root and network namespaces; otherwise it prints "SKIPPED: <reason>" and exits 77.

  sudo bench/nemesis.py [--ember build/bin/ember] [--seconds 600] [--fault 6] [--clients 2]
                        [--seed 1] [--kinds a,b] [--json FILE] [--work DIR]
"""
import argparse
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
SCRIPT = os.path.join(ROOT, "deploy", "netns-cluster.sh")
try:  # cluster_test's load, cases and HTTP call (they need numpy); without them the run skips
    from cluster_test import Load, make_cases, request  # noqa: E402
    HELPERS = None
except ImportError as e:
    HELPERS = f"tests/integration's helpers are not importable by {sys.executable}: {e}"
SKIP = 77
HOSTS = 3
MANAGER_HTTP = ("10.231.0.1", 8000)
GATEWAY = ("10.231.0.2", 8100)  # the standalone gateway, in h1's namespace
MODELS = ("mlp", "bert")  # cluster_test.make_cases's tiny MLP and BERT
KINDS = ["node-from-manager", "gateway-from-node", "halves", "isolate-node", "sigstop-node", "sigkill-node",
         "kill-router", "kill-executor", "loss-5pct", "delay-200ms"]


def ns(i):
    return f"ember-h{i}"


def addr(i):
    return f"10.231.0.{i + 1}"


def sh(args, timeout=60, check=True, env=None):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {r.returncode}: {(r.stdout + r.stderr).strip()[-800:]}")
    return r.stdout


def why_skip(ember):
    """netns_cluster_test's reasons (root, iproute2, tc, curl, namespaces allowed), and a cluster up."""
    if HELPERS:
        return HELPERS
    from netns_cluster_test import why_skip as netns_why_skip  # noqa: E402 (tests/integration)
    if (why := netns_why_skip(ember)) is not None:
        return why
    if any(line.startswith("ember-h") for line in sh(["ip", "netns", "list"]).splitlines()):
        return "ember-h* namespaces exist already: a netns cluster is up (deploy/netns-cluster.sh down)"
    return None


def has_netem():
    probe = f"ember-netem-{os.getpid()}"
    sh(["ip", "netns", "add", probe])
    try:
        sh(["ip", "-n", probe, "link", "set", "lo", "up"])
        return subprocess.run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                              capture_output=True, timeout=10).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)


class Net:
    """The nemesis's network faults, and the heal that undoes every one of them."""

    def __init__(self):
        self.routes = []  # (namespace, address) blackholes in place
        self.netem = []   # namespaces whose eth0 carries a netem qdisc

    def cut(self, side_a, side_b):
        for a in side_a:
            for b in side_b:
                for x, y in ((a, b), (b, a)):
                    sh(["ip", "-n", ns(x), "route", "add", "blackhole", addr(y) + "/32"])
                    self.routes.append((ns(x), addr(y)))

    def shape(self, host, *netem):
        # netem replaces the link's tbf for the fault; the heal puts the cluster's rate back.
        sh(["tc", "-n", ns(host), "qdisc", "replace", "dev", "eth0", "root", "netem", *netem])
        self.netem.append(host)

    def heal(self, rate):
        for namespace, a in self.routes:
            subprocess.run(["ip", "-n", namespace, "route", "del", "blackhole", a + "/32"], capture_output=True)
        for host in self.netem:
            subprocess.run(["tc", "-n", ns(host), "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
                            "burst", "256kb", "latency", "50ms"], capture_output=True)
        self.routes, self.netem = [], []


def members(endpoint):
    """The nodes the manager counts now (its gateway's /metrics: one ember_replicas series per member)."""
    try:
        status, text = request(endpoint, "GET", "/metrics", timeout=3)
    except OSError:
        return set()
    return {line.split('"')[1] for line in text.splitlines() if line.startswith('ember_replicas{node="h')}


def answers(endpoint, model, body):
    try:
        status, _ = request(endpoint, "POST", f"/v2/models/{model}/infer", body, timeout=5)
        return status == 200
    except OSError:
        return False


def recovered(cases):
    """Every node a member again, and each model answered through each gateway."""
    if members(MANAGER_HTTP) != {f"h{i}" for i in range(1, HOSTS + 1)}:
        return False
    return all(answers(e, m, cases[m][0][0]) for e in (MANAGER_HTTP, GATEWAY) for m in MODELS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--fault", type=float, default=6.0, help="how long each fault lasts before the heal")
    parser.add_argument("--clients", type=int, default=2, help="clients per gateway")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--recovery-limit", type=float, default=30.0)
    parser.add_argument("--rate", default="1gbit", help="each host link's rate")
    parser.add_argument("--json")
    parser.add_argument("--work")
    args = parser.parse_args()
    if (why := why_skip(args.ember)) is not None:
        print(f"SKIPPED: {why}")
        return SKIP
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := [k for k in kinds if k not in KINDS]:
        parser.error(f"unknown kinds {unknown} (known: {', '.join(KINDS)})")
    netem = has_netem()
    skipped = [k for k in kinds if k in ("loss-5pct", "delay-200ms") and not netem]
    kinds = [k for k in kinds if k not in skipped]
    work = args.work or tempfile.mkdtemp(prefix="ember-nemesis-")
    state = os.path.join(work, "state")
    env = dict(os.environ, EMBER=args.ember)
    rng = random.Random(args.seed)
    net = Net()
    gateway = None
    load = None
    restarted = []  # nodes started again after a SIGKILL (netns-cluster.sh's `down` knows only its own)
    faults = []
    try:
        repo, cases = make_cases(args.ember, work)
        shutil.rmtree(os.path.join(repo, "resnet"), ignore_errors=True)  # two models are enough
        config, token = os.path.join(work, "cluster.yaml"), os.path.join(work, "admin.token")
        with open(token, "w") as f:
            f.write("nemesis-admin-token\n")
        with open(config, "w") as f:
            f.write(f"gateway:\n  request_timeout: 10s\n  cold_start_timeout: 10s\nmanager:\n  admin_token_file: {token}\n")
        sh([SCRIPT, "up", str(HOSTS), "--rate", args.rate, "--repository", repo, "--dir", state, "--config", config,
            "--", "--device-memory", "1GiB", "--cache", "1GiB", "--allow-faults"], timeout=120, env=env)
        for m in MODELS:
            status, text = request(MANAGER_HTTP, "POST", f"/v2/repository/models/{m}/load", {"parameters": {"replicas": 2}},
                                timeout=60)
            if status != 200:
                raise RuntimeError(f"load {m}: HTTP {status} {text[:200]}")
        log = open(os.path.join(work, "gateway.log"), "w")
        gateway = subprocess.Popen(["ip", "netns", "exec", ns(1), args.ember, "gateway", "--manager", "10.231.0.1:7070",
                                    "--http", f"{GATEWAY[0]}:{GATEWAY[1]}", "--node-timeout", "2s", "--config", config],
                                   stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not recovered(cases):
            if time.time() > deadline:
                raise RuntimeError("the cluster and the standalone gateway are not serving after 60 s")
            time.sleep(0.5)
        pids = dict(line.split() for line in sh([SCRIPT, "pids", "--dir", state]).splitlines())
        print(f"cluster up: manager + {HOSTS} nodes in namespaces, standalone gateway in {ns(1)}; "
              f"kinds {', '.join(kinds)}" + (f"; not run (no netem in this kernel): {', '.join(skipped)}" if skipped else ""))
        load = Load(cases, list(MODELS), [MANAGER_HTTP, GATEWAY], args.clients)
        start = time.time()
        order = []
        while time.time() - start < args.seconds:
            if not order:
                order = kinds[:]
                rng.shuffle(order)
            kind = order.pop(0)
            node = rng.choice([2, 3])  # h1 hosts the standalone gateway: the victims are h2 and h3
            other = 5 - node
            t0 = time.time()
            if kind == "node-from-manager":
                net.cut([node], [0])
            elif kind == "gateway-from-node":
                net.cut([1], [node])
            elif kind == "halves":
                net.cut([0, 1], [2, 3])
            elif kind == "isolate-node":
                net.cut([node], [0, 1, other])
            elif kind == "sigstop-node":
                os.kill(int(pids[f"h{node}"]), signal.SIGSTOP)
            elif kind == "sigkill-node":
                with open(f"/proc/{pids[f'h{node}']}/cmdline", "rb") as f:
                    cmdline = [a.decode() for a in f.read().split(b"\0") if a]
                os.kill(int(pids[f"h{node}"]), signal.SIGKILL)
            elif kind in ("kill-router", "kill-executor"):
                target = "router" if kind == "kill-router" else "executor:0"
                sh([args.ember, "console", "--manager", "10.231.0.1:7070", "--token-file", token, "-c",
                    f"fault h{node} kill {target}"])
            elif kind == "loss-5pct":
                net.shape(node, "loss", "5%")
            elif kind == "delay-200ms":
                net.shape(node, "delay", "200ms")
            time.sleep(args.fault)
            healed = time.time()
            if kind == "sigstop-node":
                os.kill(int(pids[f"h{node}"]), signal.SIGCONT)
            if kind == "sigkill-node":  # started again as netns-cluster.sh started it; stopped at the end
                log = open(os.path.join(state, f"h{node}.log"), "a")
                p = subprocess.Popen(["ip", "netns", "exec", ns(node), *cmdline], stdout=log, stderr=subprocess.STDOUT)
                restarted.append(p)
                pids[f"h{node}"] = str(p.pid)
            net.heal(args.rate)
            while not recovered(cases) and time.time() - healed < args.recovery_limit:
                time.sleep(0.2)
            done = time.time()
            ok = recovered(cases)
            faults.append({"kind": kind, "victim": f"h{node}", "start": t0, "healed": healed, "end": done,
                           "recover_s": done - healed if ok else None})
            print(f"{time.time() - start:6.1f}s {kind:18} victim h{node}: " +
                  (f"recovered {done - healed:.1f}s after the heal" if ok else "NOT recovered"), flush=True)
            time.sleep(1.0)
        load.stop()
        return report(load, faults, skipped, args)
    except Exception as e:  # noqa: BLE001 (a broken run says why and keeps its logs)
        print(f"FAIL: {e}")
        for name in ("manager", "h1", "h2", "h3"):
            path = os.path.join(state, name + ".log")
            if os.path.exists(path):
                print(f"--- {name}.log\n" + "".join(open(path).readlines()[-15:]))
        return 1
    finally:
        net.heal(args.rate)
        for p in restarted:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if load is not None:
            load._stop.set()
        if gateway is not None:
            gateway.terminate()
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()
        subprocess.run([SCRIPT, "down", "--dir", state], capture_output=True, timeout=120, env=env)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def report(load, faults, skipped, args):
    rows = {}
    bad = False
    for f in faults:
        inside = [r for r in load.records if f["start"] <= r[0] <= f["end"]]
        row = rows.setdefault(f["kind"], {"faults": 0, "requests": 0, "ok": 0, "retryable": 0, "lost": 0, "wrong": 0,
                                          "latency": [], "recover": [], "unrecovered": 0})
        row["faults"] += 1
        row["requests"] += len(inside)
        for outcome in ("ok", "retryable", "lost", "wrong"):
            row[outcome] += sum(1 for r in inside if r[2] == outcome)
        row["latency"] += [r[1] - r[0] for r in inside if r[2] == "ok"]
        if f["recover_s"] is None:
            row["unrecovered"] += 1
        else:
            row["recover"].append(f["recover_s"])
    totals = {o: sum(1 for r in load.records if r[2] == o) for o in ("ok", "retryable", "lost", "wrong")}
    print(f"\n{len(load.records)} requests in {args.seconds:.0f} s (seed {args.seed}): {totals['ok']} answered right, "
          f"{totals['retryable']} retryable errors, {totals['lost']} lost, {totals['wrong']} wrong")
    print(f"{'fault':18} {'n':>3} {'requests':>8} {'right':>7} {'retry':>6} {'lost':>5} {'wrong':>5} "
          f"{'p99 ms':>8} {'max ms':>8} {'recover s (median / max)':>24}")
    out = {"seed": args.seed, "seconds": args.seconds, "totals": totals, "not_run": skipped, "kinds": {}}
    for kind, row in rows.items():
        lat = sorted(row["latency"])
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else float("nan")
        rec = (f"{statistics.median(row['recover']):.1f} / {max(row['recover']):.1f}" if row["recover"] else "-") + \
              (f" ({row['unrecovered']} not)" if row["unrecovered"] else "")
        most = lat[-1] * 1000 if lat else float("nan")
        print(f"{kind:18} {row['faults']:>3} {row['requests']:>8} {row['ok']:>7} {row['retryable']:>6} {row['lost']:>5} "
              f"{row['wrong']:>5} {p99:>8.0f} {most:>8.0f} {rec:>24}")
        out["kinds"][kind] = {k: v for k, v in row.items() if k != "latency"} | {"p99_ms": p99, "max_ms": most}
        bad |= row["unrecovered"] > 0
    if load.records:  # answered right per minute: a cluster that degrades over the run shows here
        t0 = min(r[0] for r in load.records)
        minutes = {}
        for r in load.records:
            if r[2] == "ok":
                minutes[int((r[0] - t0) // 60)] = minutes.get(int((r[0] - t0) // 60), 0) + 1
        per_s = [f"{minutes.get(m, 0) / 60:.0f}" for m in range(max(minutes) + 1)] if minutes else []
        print("answered right per second, by minute: " + " ".join(per_s))
        out["per_minute"] = [minutes.get(m, 0) for m in range(max(minutes) + 1)] if minutes else []
    for f in load.failures[:10]:
        print("  " + f)
    if skipped:
        print(f"not run (no netem in this kernel): {', '.join(skipped)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    bad |= totals["lost"] > 0 or totals["wrong"] > 0
    print("FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
