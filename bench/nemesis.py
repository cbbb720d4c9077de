#!/usr/bin/python3
"""Network nemesis (issue 37; not a timed test): the network-namespace cluster (deploy/netns-cluster.sh:
the manager in ember-h0, `ember node` in ember-h1..h3, the manager keeping its decisions in a state
folder) and two standalone gateways, one in ember-h0's namespace and one in ember-h1's, under load from
HTTP and gRPC clients on both gateways, while a seeded nemesis cuts the network between processes that
stay alive, and stops processes, one fault at a time:

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
  kill-manager        the manager killed (SIGKILL), then started again in its namespace with the same
                      command line over its state folder: the gateways serve from their tables meanwhile
  manager-from-nodes  the manager's host (h0, with one gateway) cannot reach any node, nor they it
  loss-5pct           5% of the packets a node's link carries dropped, each way: tc netem where the
                      kernel has it, else an nftables rule (`numgen random mod 100 < 5 drop` on the
                      namespace's eth0, in and out; Debian's nftables, which deploy/setup.sh installs)
  delay-200ms         200 ms added to a node's link: tc netem only (otherwise listed as not run)

A cut is a blackhole route for the peer's address (/32) in each side's namespace (iproute2 only: no
firewall needed): packets to the peer are dropped silently, as a partition drops them. Each fault
lasts --fault seconds, then heals; the next comes once the cluster recovered (every node a member of
the manager's cluster again and a request for each model answered through each gateway) or after
--recovery-limit seconds. random.Random(--seed) orders the kinds each round and picks the victims:
the same seed replays the same faults.

Every answer is checked against `ember run`'s (gRPC answers too, from their raw output bytes). Printed:
a table per fault kind of requests started
from the injection to the recovery, answered right, retryable errors (503/504), lost (no answer in 60
s) and wrong (both must be 0), duplicates (not applicable: inference is idempotent and a client sends
each request once; the gateways' retries are counted by ember_request_retries_total), p99 latency, and
time to recover after the heal (median and max); then the totals, per protocol. With --json, the same
as JSON.
Exit status 1 when a request was wrong or lost, or a fault did not recover.

Needs root and network namespaces; otherwise it prints "SKIPPED: <reason>" and exits 77.

  sudo bench/nemesis.py [--ember build/bin/ember] [--seconds 600] [--fault 6] [--clients 2]
                        [--grpc-clients 1] [--seed 1] [--kinds a,b] [--json FILE] [--work DIR]
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
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
SCRIPT = os.path.join(ROOT, "deploy", "netns-cluster.sh")
try:  # cluster_test's load, cases and HTTP call (they need numpy, grpc); without them the run skips
    import grpc
    import numpy as np
    from cluster_test import Failure, Load, compare_outputs, make_cases, request  # noqa: E402
    from grpc_api_test import outputs_of, stubs  # noqa: E402
    HELPERS = None
except ImportError as e:
    HELPERS = f"tests/integration's helpers are not importable by {sys.executable}: {e}"
SKIP = 77
HOSTS = 3
MANAGER_HTTP = ("10.231.0.1", 8000)
GATEWAYS = {0: ("10.231.0.1", 8100), 1: ("10.231.0.2", 8100)}  # the standalone gateways, by host namespace
GRPC_PORT = 8101  # each standalone gateway's gRPC port, beside its HTTP one
MODELS = ("mlp", "bert")  # cluster_test.make_cases's tiny MLP and BERT
KINDS = ["node-from-manager", "gateway-from-node", "halves", "isolate-node", "sigstop-node", "sigkill-node",
         "kill-router", "kill-executor", "kill-manager", "manager-from-nodes", "loss-5pct", "delay-200ms"]


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


def probe(*command):
    """Whether `command` (run inside a fresh namespace) succeeds: what this kernel and host can do."""
    name = f"ember-probe-{os.getpid()}"
    sh(["ip", "netns", "add", name])
    try:
        sh(["ip", "-n", name, "link", "set", "lo", "up"])
        return subprocess.run(["ip", "netns", "exec", name, *command], capture_output=True,
                              timeout=10).returncode == 0
    except OSError:
        return False
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def has_netem():
    return probe("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")


def has_nft():
    return shutil.which("nft") is not None and probe("nft", "add", "table", "inet", "ember_probe")


def loss_rules(percent):
    """nftables: `percent`% of the packets in and out of eth0 dropped at random (loopback untouched)."""
    return ("table inet ember_nemesis {\n"
            f"  chain in {{ type filter hook input priority 0; policy accept; iifname \"eth0\" numgen random mod 100 < {percent} drop; }}\n"
            f"  chain out {{ type filter hook output priority 0; policy accept; oifname \"eth0\" numgen random mod 100 < {percent} drop; }}\n"
            "}\n")


class Net:
    """The nemesis's network faults, and the heal that undoes every one of them."""

    def __init__(self):
        self.routes = []  # (namespace, address) blackholes in place
        self.netem = []   # namespaces whose eth0 carries a netem qdisc
        self.nft = []     # namespaces with the nemesis's nftables table

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

    def drop(self, host, percent):
        """Drops `percent`% of host's packets each way with nftables (no netem needed)."""
        subprocess.run(["ip", "netns", "exec", ns(host), "nft", "-f", "-"], input=loss_rules(percent), text=True,
                       capture_output=True, timeout=30, check=True)
        self.nft.append(host)

    def heal(self, rate):
        for namespace, a in self.routes:
            subprocess.run(["ip", "-n", namespace, "route", "del", "blackhole", a + "/32"], capture_output=True)
        for host in self.netem:
            subprocess.run(["tc", "-n", ns(host), "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
                            "burst", "256kb", "latency", "50ms"], capture_output=True)
        for host in self.nft:
            subprocess.run(["ip", "netns", "exec", ns(host), "nft", "delete", "table", "inet", "ember_nemesis"],
                           capture_output=True)
        self.routes, self.netem, self.nft = [], [], []


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
    return all(answers(e, m, cases[m][0][0]) for e in GATEWAYS.values() for m in MODELS)


def replica_counts():
    """model -> (ready replicas, replicas the autoscaler wants), from the manager's /metrics."""
    status, text = request(MANAGER_HTTP, "GET", "/metrics", timeout=5)
    out = {}
    for line in text.splitlines():
        for metric, slot in (("ember_autoscale_replicas{", 0), ("ember_autoscale_desired_replicas{", 1)):
            if line.startswith(metric):
                model = line.split('model="')[1].split('"')[0]
                out.setdefault(model, [0, 0])[slot] = int(float(line.rsplit(" ", 1)[1]))
    return out


def reconciled(limit):
    """Waits up to `limit` s for every model's ready replicas to equal what the autoscaler wants (a
    replica placed twice during a partition retired, a lost one replaced); the last counts seen."""
    deadline = time.time() + limit
    while True:
        counts = replica_counts()
        if (counts and all(ready == want for ready, want in counts.values())) or time.time() > deadline:
            return counts
        time.sleep(0.5)


class GrpcLoad:
    """`per_gateway` gRPC clients per standalone gateway sending ModelInfer back to back (raw tensor
    bytes) until stop(); records (start, end, outcome) as cluster_test.Load does: "ok", "retryable"
    (UNAVAILABLE, DEADLINE_EXCEEDED from the server, RESOURCE_EXHAUSTED), "wrong", or "lost" (no answer
    within the client's 60 s)."""

    RETRYABLE = ("UNAVAILABLE", "RESOURCE_EXHAUSTED")

    def __init__(self, work, cases, models, gateways, per_gateway, timeout=60):
        self.pb, self.rpc = stubs(work)
        self.timeout, self.records, self.failures = timeout, [], []
        self._stop, self._lock = threading.Event(), threading.Lock()
        self.requests = {m: [(self._request(m, body), expected) for body, expected in cases[m]] for m in models}
        self._threads = [threading.Thread(target=self._client, args=(host, k), daemon=True)
                         for host, _ in gateways for k in range(per_gateway)]
        for t in self._threads:
            t.start()

    def _request(self, model, body):
        req = self.pb.ModelInferRequest(model_name=model)
        dtypes = {"FP32": np.float32, "INT64": np.int64}
        for i in body["inputs"]:
            t = req.inputs.add()
            t.name, t.datatype = i["name"], i["datatype"]
            t.shape.extend(i["shape"])
            req.raw_input_contents.append(np.array(i["data"], dtype=dtypes[i["datatype"]]).tobytes())
        return req

    def _client(self, host, index):
        stub = self.rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"{host}:{GRPC_PORT}"))
        models, i = sorted(self.requests), index
        while not self._stop.is_set():
            cases = self.requests[models[i % len(models)]]
            req, expected = cases[i % len(cases)]
            i += 1
            start = time.time()
            try:
                compare_outputs(outputs_of(stub.ModelInfer(req, timeout=self.timeout)), expected)
                outcome = "ok"
            except Failure as e:
                outcome = "wrong"
                with self._lock:
                    self.failures.append(f"gRPC {host}: {e}")
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.time() - start >= self.timeout - 1:
                    outcome = "lost"
                elif e.code().name in self.RETRYABLE or e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    outcome = "retryable"
                else:
                    outcome = "wrong"
                if outcome != "retryable":
                    with self._lock:
                        self.failures.append(f"gRPC {host}: {e.code().name}: {e.details()}")
                if outcome == "retryable":
                    time.sleep(0.05)  # a refused call is not retried in a tight loop
            with self._lock:
                self.records.append((start, time.time(), outcome))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--fault", type=float, default=6.0, help="how long each fault lasts before the heal")
    parser.add_argument("--clients", type=int, default=2, help="HTTP clients per gateway")
    parser.add_argument("--grpc-clients", type=int, default=1, help="gRPC clients per gateway")
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
    nft = not netem and has_nft()
    skipped = [k for k in kinds if (k == "delay-200ms" and not netem) or (k == "loss-5pct" and not netem and not nft)]
    kinds = [k for k in kinds if k not in skipped]
    work = args.work or tempfile.mkdtemp(prefix="ember-nemesis-")
    state = os.path.join(work, "state")
    env = dict(os.environ, EMBER=args.ember)
    rng = random.Random(args.seed)
    net = Net()
    gateways = []
    load = grpc_load = None
    restarted = []  # nodes started again after a SIGKILL (netns-cluster.sh's `down` knows only its own)
    faults = []
    try:
        repo, cases = make_cases(args.ember, work)
        shutil.rmtree(os.path.join(repo, "resnet"), ignore_errors=True)  # two models are enough
        config, token = os.path.join(work, "cluster.yaml"), os.path.join(work, "admin.token")
        with open(token, "w") as f:
            f.write("nemesis-admin-token\n")
        with open(config, "w") as f:
            f.write(f"gateway:\n  request_timeout: 10s\n  cold_start_timeout: 10s\nmanager:\n  admin_token_file: {token}\n"
                    f"  state_dir: {os.path.join(work, 'manager-state')}\n")
        sh([SCRIPT, "up", str(HOSTS), "--rate", args.rate, "--repository", repo, "--dir", state, "--config", config,
            "--", "--device-memory", "1GiB", "--cache", "1GiB", "--allow-faults"], timeout=120, env=env)
        for m in MODELS:
            status, text = request(MANAGER_HTTP, "POST", f"/v2/repository/models/{m}/load", {"parameters": {"replicas": 2}},
                                timeout=60)
            if status != 200:
                raise RuntimeError(f"load {m}: HTTP {status} {text[:200]}")
        for host, (ip, port) in GATEWAYS.items():
            log = open(os.path.join(work, f"gateway-h{host}.log"), "w")
            gateways.append(subprocess.Popen(
                ["ip", "netns", "exec", ns(host), args.ember, "gateway", "--manager", "10.231.0.1:7070", "--http",
                 f"{ip}:{port}", "--grpc", f"{ip}:{GRPC_PORT}", "--node-timeout", "2s", "--config", config],
                stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        while not recovered(cases):
            if time.time() > deadline:
                raise RuntimeError("the cluster and the standalone gateway are not serving after 60 s")
            time.sleep(0.5)
        pids = dict(line.split() for line in sh([SCRIPT, "pids", "--dir", state]).splitlines())
        print(f"cluster up: manager + {HOSTS} nodes in namespaces, standalone gateways in {ns(0)} and {ns(1)}; "
              f"kinds {', '.join(kinds)}" + (f"; not run (no netem in this kernel): {', '.join(skipped)}" if skipped else "") +
              ("; loss through nftables" if nft and "loss-5pct" in kinds else ""))
        load = Load(cases, list(MODELS), list(GATEWAYS.values()), args.clients)
        grpc_load = GrpcLoad(work, cases, MODELS, list(GATEWAYS.values()), args.grpc_clients)
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
            elif kind == "kill-manager":
                with open(f"/proc/{pids['manager']}/cmdline", "rb") as f:
                    manager_cmdline = [a.decode() for a in f.read().split(b"\0") if a]
                os.kill(int(pids["manager"]), signal.SIGKILL)
            elif kind == "manager-from-nodes":
                net.cut([0], [1, 2, 3])
            elif kind == "loss-5pct":
                if netem:
                    net.shape(node, "loss", "5%")
                else:
                    net.drop(node, 5)
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
            if kind == "kill-manager":  # again over its state folder, on the same addresses
                log = open(os.path.join(state, "manager.log"), "a")
                p = subprocess.Popen(["ip", "netns", "exec", ns(0), *manager_cmdline], stdout=log,
                                     stderr=subprocess.STDOUT)
                restarted.append(p)
                pids["manager"] = str(p.pid)
            net.heal(args.rate)
            # Recovered: the check holds twice in a row, 0.2 s apart (a cluster that recovers and
            # falls back is not recovered), within --recovery-limit.
            ok = False
            while time.time() - healed < args.recovery_limit:
                if recovered(cases):
                    time.sleep(0.2)
                    if recovered(cases):
                        ok = True
                        break
                time.sleep(0.2)
            done = time.time()
            faults.append({"kind": kind, "victim": f"h{node}", "start": t0, "healed": healed, "end": done,
                           "recover_s": done - healed if ok else None, "replicas": replica_counts()})
            victim = {"kill-manager": "manager", "manager-from-nodes": "h0", "halves": "h0,h1|h2,h3"}.get(kind, f"h{node}")
            faults[-1]["victim"] = victim
            print(f"{time.time() - start:6.1f}s {kind:18} victim {victim}: " +
                  (f"recovered {done - healed:.1f}s after the heal" if ok else "NOT recovered"), flush=True)
            time.sleep(1.0)
        load.stop()
        grpc_load.stop()
        counts = reconciled(args.recovery_limit)
        return report({"HTTP": load, "gRPC": grpc_load}, faults, skipped, args, counts)
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
        for lo in (load, grpc_load):
            if lo is not None:
                lo._stop.set()
        for gateway in gateways:
            gateway.terminate()
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()
        subprocess.run([SCRIPT, "down", "--dir", state], capture_output=True, timeout=120, env=env)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def report(loads, faults, skipped, args, counts):
    """`loads`: protocol -> its load (records and failures); `counts`: model -> (ready, wanted)."""
    records = [r for lo in loads.values() for r in lo.records]
    failures = [f for lo in loads.values() for f in lo.failures]
    rows = {}
    bad = False
    for f in faults:
        inside = [r for r in records if f["start"] <= r[0] <= f["end"]]
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
    totals = {o: sum(1 for r in records if r[2] == o) for o in ("ok", "retryable", "lost", "wrong")}
    print(f"\n{len(records)} requests in {args.seconds:.0f} s (seed {args.seed}): {totals['ok']} answered right, "
          f"{totals['retryable']} retryable errors, {totals['lost']} lost, {totals['wrong']} wrong")
    per_protocol = {name: {o: sum(1 for r in lo.records if r[2] == o) for o in ("ok", "retryable", "lost", "wrong")}
                    for name, lo in loads.items()}
    print("by protocol: " + "; ".join(f"{name} {len(lo.records)} requests, {per_protocol[name]['ok']} right, "
                                       f"{per_protocol[name]['retryable']} retryable, {per_protocol[name]['lost']} lost, "
                                       f"{per_protocol[name]['wrong']} wrong" for name, lo in loads.items()))
    print(f"{'fault':18} {'n':>3} {'requests':>8} {'right':>7} {'retry':>6} {'lost':>5} {'wrong':>5} "
          f"{'p99 ms':>8} {'max ms':>8} {'recover s (median / max)':>24}")
    out = {"seed": args.seed, "seconds": args.seconds, "totals": totals, "by_protocol": per_protocol,
           "not_run": skipped, "kinds": {}}
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
    if records:  # answered right per minute: a cluster that degrades over the run shows here
        t0 = min(r[0] for r in records)
        minutes = {}
        for r in records:
            if r[2] == "ok":
                minutes[int((r[0] - t0) // 60)] = minutes.get(int((r[0] - t0) // 60), 0) + 1
        per_s = [f"{minutes.get(m, 0) / 60:.0f}" for m in range(max(minutes) + 1)] if minutes else []
        print("answered right per second, by minute: " + " ".join(per_s))
        out["per_minute"] = [minutes.get(m, 0) for m in range(max(minutes) + 1)] if minutes else []
    for f in failures[:10]:
        print("  " + f)
    if skipped:
        print(f"not run (no netem in this kernel): {', '.join(skipped)}")
    extra = [f"{f['kind']} ({m} {r}/{w})" for f in faults for m, (r, w) in sorted(f["replicas"].items()) if r > w]
    print(f"models holding more ready replicas than wanted as a fault recovered: {len(extra)}" +
          (f" ({', '.join(extra[:6])})" if extra else ""))
    print("replicas after the last heal (ready / wanted by the autoscaler): " +
          ", ".join(f"{m} {ready}/{want}" for m, (ready, want) in sorted(counts.items())))
    out["replicas"] = counts
    out["placed_twice_at_recovery"] = extra
    bad |= any(ready != want for ready, want in counts.values())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    bad |= totals["lost"] > 0 or totals["wrong"] > 0
    print("FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
