#!/usr/bin/python3
"""Multi-process test (issue 37, "lost, with a standby"): two managers sharing one etcd (manager.etcd,
a 2 s lease), two `ember node` processes and a standalone `ember gateway` given both managers
(`--manager A,B`), on loopback; two clients send warm requests through the gateway the whole time,
every answer checked against `ember run`.

1. Whichever manager wins the lease leads; the other stands by (it neither listens nor serves). A
   load (mlp, two replicas) and an SLO are decided through the leader.
2. The leader is killed (SIGKILL) and not restarted: the standby takes over once etcd lets the lease
   expire, with the decisions the leader kept in etcd; the nodes and the gateway follow it. Measured:
   the time from the kill to the new leader, and to the nodes rejoined.
3. The killed manager is started again (it stands by). The leader is paused (SIGSTOP) past its lease:
   the standby takes over and a new decision (`slo mlp 60ms`) is made through it. The paused manager
   is resumed (SIGCONT): it finds its lease gone and exits (75) without acting, and the decision made
   after it lost the lead holds.

Checked: no warm request lost, refused or wrong; both decisions and the replicas hold across both
takeovers; the console says which manager leads. Skipped (77) without /usr/bin/etcd.

Usage: manager_standby_test.py --ember PATH
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import Failure, Load, Spawner, free_port, make_cases, request, run_guarded, wait_for  # noqa: E402

ETCD = "/usr/bin/etcd"
SKIP = 77
CONFIG = """manager:
  admin_token_file: {token}
  etcd: 127.0.0.1:{etcd}
  etcd_prefix: /ember-test
  lease_ttl: 2s
  recovery_window: 2s
  node_timeout: 2s
autoscale:
  enabled: false
node:
  rejoin_interval: 250ms
gateway:
  reconnect_interval: 250ms
"""


def _body(ember, work, procs, logs):
    repo, cases = make_cases(ember, work)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write("standby-test-token\n")
    run = Spawner(ember, work, procs, logs)
    spawn, log_of = run.spawn, run.log
    eport = run.start_etcd(ETCD)
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write(CONFIG.format(token=token, etcd=eport))
    mports = {"m1": free_port(), "m2": free_port()}
    managers = ",".join(f"127.0.0.1:{p}" for p in mports.values())
    gport = free_port()

    def start_manager(name):
        spawn(name, ["manager", "--config", config, "--listen", f"127.0.0.1:{mports[name]}", "--repository", repo,
                     "--data-listen", "127.0.0.1:0"])

    def console(*commands):
        args = [a for c in commands for a in ("-c", c)]
        r = subprocess.run([ember, "--log-level", "warn", "console", "--json", "--manager", managers, "--token-file",
                            token, *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise Failure(f"console {commands}: exit {r.returncode}: {r.stdout} {r.stderr}")
        return r.stdout, r.stderr

    def leader():
        return run.leader(mports)

    def models():
        out, _ = console("models")
        return {m["name"]: m for m in json.loads(out)}

    def mlp_replicas():
        out, _ = console("nodes")
        return sum(1 for n in json.loads(out) if "mlp/1" in n["replicas"])

    start_manager("m1")
    start_manager("m2")
    wait_for("a leader", lambda: leader() is not None, 30)
    first = leader()
    standby = "m2" if first == "m1" else "m1"
    wait_for("the other to stand by", lambda: "standing by; the manager at" in log_of(standby), 10)
    for i in (1, 2):
        spawn(f"node{i}", ["node", "--config", config, "--manager", managers, "--name", f"node{i}",
                           "--device-memory", "512MiB", "--cache", "512MiB", "--threads", "1"])
    spawn("gateway", ["gateway", "--config", config, "--manager", managers, "--http", f"127.0.0.1:{gport}",
                      "--node-timeout", "2s"])
    wait_for("the gateway", lambda: request(gport, "GET", "/v2/health/ready")[0] == 200, 30)
    wait_for("two nodes", lambda: len(json.loads(console("nodes")[0])) == 2, 30)
    _, said = console("models")
    if f"the manager at 127.0.0.1:{mports[first]} leads" not in said:
        raise Failure(f"the console did not say which manager leads: {said!r}")
    console("load mlp 2", "slo mlp 80ms")
    wait_for("mlp ready at the gateway", lambda: request(gport, "GET", "/v2/models/mlp/ready")[0] == 200, 30)
    wait_for("the gateway's direct connections", lambda: log_of("gateway").count("directly") >= 2, 30)
    load = Load(cases, "mlp", [gport], 2)
    time.sleep(1.0)

    # 2. The leader killed, not restarted.
    procs[first].kill()
    procs[first].wait()
    killed = time.time()
    wait_for("the standby to lead", lambda: leader() == standby, 30)
    took_over = time.time() - killed
    wait_for("the nodes to rejoin", lambda: log_of(standby).count("manager: node node") >= 2, 30)
    rejoined = time.time() - killed
    wait_for("mlp's two replicas under the new leader", lambda: mlp_replicas() == 2, 30)
    m = models()["mlp"]
    if m["slo_deadline_us"] != 80000 or not m["slo_set"]:
        raise Failure(f"the SLO decided through the killed leader was lost: {m}")
    print(f"leader {first} killed: {standby} led {took_over:.1f} s later (lease 2 s), the nodes rejoined it "
          f"{rejoined:.1f} s after the kill; mlp: 2 replicas, SLO 80 ms kept")

    # 3. The killed manager back as a standby; the leader paused past its lease.
    start_manager(first)
    wait_for("the restarted manager to stand by", lambda: "standing by; the manager at" in log_of(first), 20)
    paused = standby
    procs[paused].send_signal(signal.SIGSTOP)
    stopped = time.time()
    wait_for("the standby to lead while the leader is paused", lambda: leader() == first, 30)
    took_over_paused = time.time() - stopped
    wait_for("the nodes to follow", lambda: log_of(first).count("manager: node node") >= 2, 30)
    console("slo mlp 60ms")  # decided through the new leader, while the old one is paused
    procs[paused].send_signal(signal.SIGCONT)
    try:
        code = procs[paused].wait(timeout=20)
    except subprocess.TimeoutExpired:
        raise Failure(f"{paused}, resumed after losing its lease, did not exit")
    if code != 75 or "lost the lead" not in log_of(paused):
        raise Failure(f"{paused} exited {code} without saying it lost the lead:\n" + log_of(paused)[-1500:])
    time.sleep(1.0)
    m = models()["mlp"]
    if m["slo_deadline_us"] != 60000:
        raise Failure(f"the decision made after the pause did not hold: {m}")
    wait_for("mlp's two replicas under the third leader", lambda: mlp_replicas() == 2, 30)
    load.stop()
    failures, retryable = load.failures, load.count("retryable")
    print(f"leader {paused} paused (SIGSTOP): {first} led {took_over_paused:.1f} s later; {paused}, resumed, exited "
          f"75 (lost the lead) without acting; SLO 60 ms decided meanwhile holds")
    print(f"{load.count('ok')} warm requests answered right, {retryable} refused, {len(failures)} lost or wrong")
    if failures:
        raise Failure(f"{len(failures)} warm requests lost or wrong, e.g.: " + "; ".join(failures[:5]))
    if retryable:
        raise Failure(f"{retryable} warm requests were refused")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    args = ap.parse_args()
    if not shutil.which(ETCD):
        print(f"SKIPPED: {ETCD} is not installed (Debian's etcd-server; deploy/setup.sh installs it)")
        return SKIP
    return run_guarded("ember-manager-standby-", lambda work, procs, logs: _body(args.ember, work, procs, logs))


if __name__ == "__main__":
    sys.exit(main())
