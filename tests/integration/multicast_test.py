#!/usr/bin/python3
"""Chained multicast of model bytes, end to end: a manager and five `ember node` processes, a model's
bytes distributed from one holder along a chain of four receivers, and the faults a chain must
survive. Runs on loopback, over the transport given (tcp or ucx); each scenario is a fresh cluster.

  four_receivers   node1 holds the model; node2..node5 receive it along one chain. node1's blob
                   server corrupts its 3rd data frame (--fault-corrupt-frame): the receiver must
                   detect it, fetch that chunk again, and every receiver must end with the verified
                   digest. Each receiver's source must be its predecessor in the chain.
  kill_second_hop  every receiver throttled to 25 MB/s; the second hop is killed with SIGKILL at
                   about half way. The hops behind it must finish, resuming from their own offsets
                   (not from zero) from a live upstream.
  kill_manager_and_hop  as kill_second_hop, and the manager (the chain's controller) is killed with it
                   and not restarted: the hop behind the dead one, asking no controller, walks back up
                   its chain (its upstreams as the manager gave them, nearest first) and resumes from
                   the first hop from its own offset; the hops behind it finish.
  slow_hop         the second hop receives at 4 MB/s while the others are fast: the manager must
                   splice it out (transfer.min_rate), and the hops behind it must finish long before it.
  scale_out        a load asking for four replicas of a model no node holds: the four nodes get the
                   bytes along one chain from the repository, and all four replicas become ready.
  lossy_hop        (--netns only) 5% of the packets on the second hop's link dropped, each way (an
                   nftables rule in its namespace; Debian's nftables): every receiver must end with the
                   verified digest. Whether the manager splices the hop out (below transfer.min_rate)
                   varies from run to run and is reported; the hop behind it, pulling over the same
                   lossy link while it is not spliced out, may finish seconds after it.
  very_lossy_hop   (--netns only) the same with 30% dropped: the manager must splice the hop out, and
                   the hops behind it finish from the hop before it; the lossy hop itself is not
                   waited for (it crawls, and its control connection is as lossy).

With --netns the same scenarios run on deploy/netns-cluster.sh (nodes h1..h5 in their own network
namespaces, 1 Gbit/s links); the test reports SKIPPED (exit 77) where namespaces are not allowed.

Usage: multicast_test.py --ember PATH [--transport tcp|ucx] [--netns] [--only SCENARIO]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ports import free_port

MODEL = "resnet"
NETNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "netns-cluster.sh")
CONFIG = """\
transfer:
  chunk: 1MiB
  progress_interval: 100ms
  idle_timeout: 3s
  stall_timeout: 1s
  min_rate: 12MB/s
  lag: 8MiB
"""


class Failure(Exception):
    pass


def post(host, port, path, body, timeout=120):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read().decode() or "{}")
    finally:
        conn.close()


class Cluster:
    """A manager with the HTTP gateway and five nodes, each with its own log: on loopback (nodes
    node1..node5), or with --netns in network namespaces behind 1 Gbit/s links (deploy/netns-cluster.sh:
    nodes h1..h5, the manager in ember-h0)."""

    def __init__(self, ember, work, transport, node_args, netns=False, security=""):
        self.ember, self.work, self.transport, self.netns = ember, work, transport, netns
        self.procs, self.logs, self.killed = {}, {}, set()
        cfg = os.path.join(work, "ember.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG + f"  transport: {transport}\n" + security)
        if netns:
            self.prefix, self.host = "h", "10.231.0.1"
            self.http, self.state = 8000, os.path.join(work, "cluster")
            args = [NETNS, "up", "5", "--rate", "1gbit", "--config", cfg, "--repository", os.path.join(work, "repo"),
                    "--dir", self.state]
            for i in range(1, 6):
                extra = node_args.get(f"node{i}", [])
                if extra:
                    args += ["--host-args", str(i), " ".join(extra)]
            args += ["--", "--device-memory", "1GiB", "--cache", "1GiB"]
            up = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, EMBER=ember), timeout=90)
            if up.returncode != 0:
                raise Failure(f"netns-cluster.sh up failed:\n{up.stdout}{up.stderr}")
            for name in ["manager"] + [self.name(i) for i in range(1, 6)]:
                self.logs[name] = os.path.join(self.state, f"{name}.log")
                with open(os.path.join(self.state, f"{name}.pid")) as f:
                    self.procs[name] = int(f.read())
            return
        self.prefix, self.host = "node", "127.0.0.1"
        self.http, self.listen = free_port(), free_port()
        common = ["--config", cfg]
        self.start("manager", ["manager", "--listen", f"127.0.0.1:{self.listen}", "--http", f"127.0.0.1:{self.http}",
                               "--repository", os.path.join(work, "repo")] + common)
        self.wait(lambda: self.ready(), 20, "the manager's HTTP endpoint")
        for i in range(1, 6):
            name = self.name(i)
            self.start(name, ["node", "--manager", f"127.0.0.1:{self.listen}", "--name", name, "--device-memory",
                              "1GiB", "--cache", "1GiB"] + common + node_args.get(name, []))
        self.wait(lambda: self.joined() == 5, 20, "five nodes to join")

    def name(self, i):
        return f"{self.prefix}{i}"

    def names(self, *indices):
        return [self.name(i) for i in indices]

    def start(self, name, args):
        log = os.path.join(self.work, f"{name}.log")
        self.logs[name] = log
        with open(log, "w") as out:
            self.procs[name] = subprocess.Popen([self.ember, "--log-level", "info"] + args, stdout=out,
                                                stderr=subprocess.STDOUT)

    def alive(self, name):
        p = self.procs[name]
        if isinstance(p, int):
            try:
                os.kill(p, 0)
                with open(f"/proc/{p}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False
        return p.poll() is None

    def ready(self):
        try:
            conn = http.client.HTTPConnection(self.host, self.http, timeout=2)
            conn.request("GET", "/v2/health/ready")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def joined(self):
        return len(re.findall(r"joined as #", self.log("manager")))

    def log(self, name):
        with open(self.logs[name]) as f:
            return f.read()

    def wait(self, predicate, seconds, what):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for name in self.procs:
                if name not in self.killed and not self.alive(name):
                    raise Failure(f"{name} exited:\n{self.log(name)[-2000:]}")
            if predicate():
                return
            time.sleep(0.1)
        raise Failure(f"timed out after {seconds} s waiting for {what}")

    def kill(self, name):
        self.killed.add(name)
        p = self.procs[name]
        if isinstance(p, int):
            os.kill(p, signal.SIGKILL)
        else:
            p.send_signal(signal.SIGKILL)
            p.wait(10)

    def post(self, path, body, timeout=120):
        return post(self.host, self.http, path, body, timeout)

    def distribute(self, nodes, mode="chain", timeout=120):
        return self.post(f"/ember/v1/models/{MODEL}/distribute", {"nodes": nodes, "mode": mode}, timeout)

    def stop(self):
        if self.netns:
            subprocess.run([NETNS, "down", "--dir", self.state], capture_output=True, timeout=60)
            return
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def seed_holder(c):
    status, body = c.distribute([c.name(1)])
    if status != 200 or body.get("errors"):
        raise Failure(f"seeding {c.name(1)} failed: {status} {body}")
    return body["bytes"]


def verified(c, name):
    return re.search(r"node %s holds %s/1 \(.* verified" % (name, MODEL), c.log(name))


def four_receivers(c):
    blob = seed_holder(c)
    n1, n2, n3, n4, n5 = c.names(1, 2, 3, 4, 5)
    status, body = c.distribute([n2, n3, n4, n5])
    if status != 200 or body["errors"]:
        raise Failure(f"distribute failed: {status} {body}")
    if body["chains"] != [f"{n1} -> {n2} -> {n3} -> {n4} -> {n5}"]:
        raise Failure(f"unexpected chain {body['chains']}")
    sources = {n["node"]: n["source"] for n in body["nodes"]}
    want = {n2: f"peer:{n1}", n3: f"peer:{n2}", n4: f"peer:{n3}", n5: f"peer:{n4}"}
    if sources != want:
        raise Failure(f"sources {sources}, expected {want}")
    for name in (n2, n3, n4, n5):
        if not verified(c, name):
            raise Failure(f"{name} did not verify the blob:\n{c.log(name)[-1500:]}")
    if not re.search(r"node %s: .*CRC-32C.*re-fetching from offset \d+" % n2, c.log(n2), re.S):
        raise Failure(f"{n2} did not detect and re-fetch the corrupted chunk:\n" + c.log(n2)[-2000:])
    # The other receivers never saw the bad bytes: they pulled verified chunks from n2 on.
    for name in (n3, n4, n5):
        if "re-fetching" in c.log(name):
            raise Failure(f"{name} saw a corrupted chunk too")
    return f"4 receivers verified {blob} bytes in {body['seconds']:.2f} s; corrupted frame re-fetched"


def kill_second_hop(c):
    seed_holder(c)
    n2, n3, n4, n5 = c.names(2, 3, 4, 5)
    result = {}
    t = threading.Thread(target=lambda: result.update(zip(("status", "body"), c.distribute([n2, n3, n4, n5]))))
    t_start = time.time()
    t.start()
    # Half way: the receivers are throttled to 25 MB/s, so ~98 MB takes ~4 s; kill the second hop at 2 s.
    time.sleep(2.0)
    c.kill(n3)
    t.join(120)
    if t.is_alive():
        raise Failure(f"distribute did not answer after {n3} was killed")
    body = result["body"]
    done = sorted(n["node"] for n in body.get("nodes", []))
    errors = body.get("errors", [])
    if done != [n2, n4, n5] or len(errors) != 1 or not errors[0].startswith(n3):
        raise Failure(f"expected {n2}, {n4}, {n5} to finish and {n3} to fail: {result}")
    resumed = re.search(r"node %s resumes %s/1 from (\S+) at offset (\d+)" % (n4, MODEL), c.log(n4))
    if not resumed or int(resumed.group(2)) == 0:
        raise Failure(f"{n4} did not resume from its own offset:\n" + c.log(n4)[-2000:])
    for name in (n2, n4, n5):
        if not verified(c, name):
            raise Failure(f"{name} did not verify the blob")
    return (f"{n3} killed; {n4} resumed from {resumed.group(1)} at offset {resumed.group(2)}; 3 receivers "
            f"verified; answered {time.time() - t_start:.1f} s after the start")


def kill_manager_and_hop(c):
    seed_holder(c)
    n2, n3, n4, n5 = c.names(2, 3, 4, 5)

    def distribute():
        try:
            c.distribute([n2, n3, n4, n5])
        except (OSError, http.client.HTTPException, ValueError):
            pass  # the manager answering it is killed

    threading.Thread(target=distribute, daemon=True).start()
    t0 = time.time()
    c.wait(lambda: "receives" in c.log(n5), 20, f"{n5} to start receiving")
    time.sleep(1.5)  # the receivers are throttled to 25 MB/s: ~98 MB take ~4 s
    c.kill("manager")
    c.kill(n3)
    killed = time.time()
    c.wait(lambda: all(verified(c, n) for n in (n2, n4, n5)), 60,
           f"{n2}, {n4} and {n5} to verify the blob without a manager")
    walked = re.search(r"node %s: the chain controller is away .*; %s failed, trying (\S+) in \d+ s from offset (\d+)"
                       % (n4, n3), c.log(n4))
    if not walked or walked.group(1) != n2 or int(walked.group(2)) == 0:
        raise Failure(f"{n4} did not turn to {n2} on its own, from its own offset:\n" + c.log(n4)[-2000:])
    if not re.search(r"node %s holds %s/1 .*last upstream %s\)" % (n4, MODEL, n2), c.log(n4)):
        raise Failure(f"{n4} did not finish from {n2}:\n" + c.log(n4)[-2000:])
    return (f"manager and {n3} killed {killed - t0:.1f} s in; {n4} resumed from {n2} at offset {walked.group(2)} "
            f"without a controller; {n2}, {n4}, {n5} verified {time.time() - killed:.1f} s after the kill")


def slow_hop(c):
    seed_holder(c)
    n2, n3, n4, n5 = c.names(2, 3, 4, 5)
    t0 = time.time()
    threading.Thread(target=lambda: c.distribute([n2, n3, n4, n5], timeout=300), daemon=True).start()
    c.wait(lambda: all(re.search(r"node %s holds" % n, c.log(n)) for n in (n2, n4, n5)), 60,
           f"{n2}, {n4} and {n5} to finish around the slow hop")
    took = time.time() - t0
    if re.search(r"node %s holds" % n3, c.log(n3)):
        raise Failure("the slow hop finished first: the test did not throttle it")
    if not re.search(r"splice: %s now pulls from %s" % (n4, n2), c.log("manager")):
        raise Failure("the manager did not splice the slow hop out:\n" + c.log("manager")[-2000:])
    return f"{n3} (4 MB/s) spliced out; {n2}, {n4}, {n5} done in {took:.1f} s while {n3} still receives"


def scale_out(c):
    # Four replicas at once of a model nobody holds: the manager chains them from the repository.
    status, body = c.post(f"/v2/repository/models/{MODEL}/load", {"parameters": {"replicas": 4}})
    if status != 200:
        raise Failure(f"load with 4 replicas failed: {status} {body}")
    c.wait(lambda: len(re.findall(r"replica %s/1 ready on node" % MODEL, c.log("manager"))) == 4, 60,
           "four replicas to be ready")
    chain = re.search(r"transfer \d+ of %s/1 \(.*\): (manager( -> %s\d){4})" % (MODEL, c.prefix), c.log("manager"))
    if not chain:
        raise Failure("the scale-out did not use a chain:\n" + c.log("manager")[-2000:])
    status, body = c.post(f"/v2/repository/models/{MODEL}/load", {"parameters": {"replicas": 0}})
    if status != 400 or "replicas" not in body.get("error", ""):
        raise Failure(f"replicas 0 should be refused with a clear error: {status} {body}")
    return f"4 replicas placed by one chain: {chain.group(1)}"


def lossy_hop(c, percent=5, must_splice=False):
    if not shutil.which("nft"):
        return "not run: no nft (Debian's nftables) on this host"
    seed_holder(c)
    n2, n3, n4, n5 = c.names(2, 3, 4, 5)
    rules = ("table inet ember_loss {\n"
             '  chain in { type filter hook input priority 0; policy accept; iifname "eth0" numgen random mod 100 < %d drop; }\n'
             '  chain out { type filter hook output priority 0; policy accept; oifname "eth0" numgen random mod 100 < %d drop; }\n'
             "}\n") % (percent, percent)
    subprocess.run(["ip", "netns", "exec", "ember-" + n3, "nft", "-f", "-"], input=rules, text=True, check=True,
                   capture_output=True, timeout=30)
    t0 = time.time()
    threading.Thread(target=lambda: c.distribute([n2, n3, n4, n5], timeout=300), daemon=True).start()
    # Behind heavy loss the hop itself may crawl for minutes (or give up, its control connection lossy
    # too): only the hops around it are waited for then.
    waited = (n2, n4, n5) if must_splice else (n2, n3, n4, n5)
    c.wait(lambda: all(verified(c, n) for n in waited), 120, f"{', '.join(waited)} to verify the bytes")
    took = time.time() - t0
    dropped = subprocess.run(["ip", "netns", "exec", "ember-" + n3, "nft", "list", "table", "inet", "ember_loss"],
                             capture_output=True, text=True).stdout
    if "drop" not in dropped:
        raise Failure("the loss rule was not in place:\n" + dropped)
    spliced = re.search(r"splice: %s now pulls from %s" % (n4, n2), c.log("manager"))
    ends = {}
    for n in (n2, n3, n4, n5):
        done = re.search(r"node %s holds %s/1 \(.* verified, ([\d.]+) s" % (n, MODEL), c.log(n))
        if done:
            ends[n] = float(done.group(1))
    if must_splice and not spliced:
        raise Failure(f"the manager did not splice out the hop behind {percent}% loss: {ends}\n" +
                      c.log("manager")[-2000:])
    how = f"{n3} spliced out ({n4} pulled from {n2})" if spliced else f"{n3} kept up, not spliced"
    lossy = f"{n3} {ends[n3]:.2f} s" if n3 in ends else f"{n3} still receiving"
    return (f"{percent}% loss on {n3}'s link: {how}; {', '.join(waited)} verified in {took:.1f} s (hops' own "
            "times: " + ", ".join(f"{n} {t:.2f} s" for n, t in ends.items() if n != n3) + f"; {lossy})")


SCENARIOS = {
    "four_receivers": (four_receivers, {"node1": ["--fault-corrupt-frame", "3"]}),
    "kill_second_hop": (kill_second_hop, {f"node{i}": ["--fault-receive-rate", "25MB/s"] for i in range(2, 6)}),
    "kill_manager_and_hop": (kill_manager_and_hop,
                             {f"node{i}": ["--fault-receive-rate", "25MB/s"] for i in range(2, 6)}),
    "slow_hop": (slow_hop, {"node3": ["--fault-receive-rate", "4MB/s"]}),
    "scale_out": (scale_out, {}),
    "lossy_hop": (lossy_hop, {}),
    "very_lossy_hop": (lambda c: lossy_hop(c, 30, must_splice=True), {}),
}


def secure(ember, work):
    """The `security:` section of a cluster with mutual TLS on the control plane (one certificate
    from `ember certs` for every member, which the cluster's CA signed) and tickets on the data plane
    (every hop's fetch, spliced or not, carries the manager's ticket)."""
    d = os.path.join(work, "certs")
    for args in (["init", "--dir", d], ["issue", "--dir", d, "--name", "member", "--role", "node", "--san",
                                        "127.0.0.1,10.231.0.1"]):
        subprocess.run([ember, "certs", *args], check=True, capture_output=True)
    with open(os.path.join(d, "tickets.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return ("security:\n" + "".join(f"  {k}: {os.path.join(d, v)}\n" for k, v in (
        ("tls_certificate", "member.crt"), ("tls_key", "member.key"), ("tls_ca", "ca.crt"),
        ("ticket_key_file", "tickets.key"))))


def netns_unavailable():
    """Why the namespace cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    probe = "ember-probe-%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return "'ip netns add' is not permitted here: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--transport", default="tcp", choices=["tcp", "ucx"])
    ap.add_argument("--only", choices=sorted(SCENARIOS))
    ap.add_argument("--secure", action="store_true",
                    help="every process with mutual TLS on the control plane and tickets on the data plane")
    ap.add_argument("--data-plane-tls", action="store_true",
                    help="with --secure: model bytes over TLS too (security.data_plane: tls)")
    ap.add_argument("--netns", action="store_true",
                    help="run in network namespaces behind 1 Gbit/s links (deploy/netns-cluster.sh; needs root)")
    args = ap.parse_args()
    if args.netns:
        why = netns_unavailable()
        if why:
            print(f"SKIPPED: {why}")
            return 77
    work = tempfile.mkdtemp(prefix="ember-multicast-")
    ok = True
    try:
        repo = os.path.join(work, "repo")
        subprocess.run([args.ember, "model", "new", "--arch", "resnet50", "--seed", "5", "--out",
                        os.path.join(repo, MODEL, "1")], check=True, capture_output=True)
        security = secure(args.ember, work) if args.secure else ""
        if args.data_plane_tls:
            security += "  data_plane: tls\n"
        for name, (fn, node_args) in SCENARIOS.items():
            if args.only and name != args.only:
                continue
            if name.endswith("lossy_hop") and not args.netns:
                print(f"{name}: not run: needs --netns (the loss is a rule in the hop's own namespace)", flush=True)
                continue
            sub = os.path.join(work, name)
            os.makedirs(sub)
            os.symlink(repo, os.path.join(sub, "repo"))
            start = time.time()
            c = None
            try:
                c = Cluster(args.ember, sub, args.transport, node_args, args.netns, security)
                where = ("netns" if args.netns else "loopback") + (", secure" if args.secure else "") + \
                    (", data plane TLS" if args.data_plane_tls else "")
                print(f"{name} [{args.transport}, {where}]: {fn(c)} ({time.time() - start:.1f} s)", flush=True)
            except Failure as e:
                ok = False
                print(f"{name} [{args.transport}]: FAILED: {e}", flush=True)
            finally:
                if c:
                    c.stop()
                elif args.netns:
                    subprocess.run([NETNS, "down", "--dir", os.path.join(sub, "cluster")], capture_output=True)
    finally:
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs kept in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
