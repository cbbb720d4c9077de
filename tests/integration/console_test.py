#!/usr/bin/python3
"""`ember console` against a live cluster (issue 15): a manager with an admin token file and one node on
loopback. Run one-shot (-c, --json), as a script on stdin, and interactively through a pseudo-terminal
(libedit: Tab completes a command, history is written).

Checked: reads answer without a token (manager.open_reads), changes need the right token (a missing
or wrong one is permission_denied and logged as refused, a right one is done and logged with who
asked), bad commands are clear errors with the usage, JSON parses, and the interactive session
completes "mod<Tab>" to "models" and prints the table. Fault commands work only on the node started with
--allow-faults and only with the token (kill the router and an executor, delay, heal, fail-alloc; bad ones
are clear errors), and the node keeps its membership through a router kill.

Usage: console_test.py --ember PATH
"""
import argparse
import json
import os
import pty
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_test import Failure, free_port, run_guarded, wait_for  # noqa: E402


def _body(ember, work, procs, logs):
    subprocess.run([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "5", "--out",
                    os.path.join(work, "repo", "mlp", "1")], check=True, capture_output=True)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write("  correct-horse-battery\n")
    wrong = os.path.join(work, "wrong.token")
    with open(wrong, "w") as f:
        f.write("correct-horse-batterx\n")
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write(f"manager:\n  admin_token_file: {token}\nautoscale:\n  enabled: false\n")
    mport = free_port()
    manager = f"127.0.0.1:{mport}"

    def spawn(name, args):
        logs[name] = open(os.path.join(work, name + ".log"), "w")
        procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

    spawn("manager", ["manager", "--config", config, "--listen", manager, "--repository",
                      os.path.join(work, "repo")])
    for n in ("node1", "node2"):  # node1 takes fault commands
        spawn(n, ["node", "--manager", manager, "--name", n, "--device-memory", "256MiB", "--cache", "256MiB",
                  "--threads", "1"] + (["--allow-faults"] if n == "node1" else []))
    env = dict(os.environ, HOME=work, USER="tester")
    env.pop("EMBER_ADMIN_TOKEN_FILE", None)

    def console(*args, stdin=None):
        r = subprocess.run([ember, "--log-level", "warn", "console", "--manager", manager, *args], input=stdin,
                           capture_output=True, text=True, timeout=60, env=env)
        return r.returncode, r.stdout, r.stderr

    wait_for("the nodes to join", lambda: all(n in console("-c", "nodes")[1] for n in ("node1", "node2")), 30)

    rc, out, err = console("-c", "transfers")
    if rc != 0 or "no transfer in flight" not in out:
        raise Failure(f"transfers: rc {rc}: {out} {err}")
    rc, out, err = console("-c", "models", "-c", "help")
    if rc != 0 or "mlp" not in out or "unloaded" not in out or "distribute MODEL" not in out:
        raise Failure(f"models/help: rc {rc}: {out} {err}")
    rc, out, err = console("--json", "-c", "nodes")
    nodes = json.loads(out)
    if rc != 0 or sorted(n["name"] for n in nodes) != ["node1", "node2"] or \
            nodes[0]["devices"][0]["memory_bytes"] != 256 << 20:
        raise Failure(f"nodes --json: rc {rc}: {out} {err}")

    rc, out, err = console("-c", "load mlp 1")
    if rc == 0 or "permission_denied" not in err:
        raise Failure(f"a load without a token: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", wrong, "-c", "load mlp 1")
    if rc == 0 or "wrong or missing admin token" not in err:
        raise Failure(f"a load with a wrong token: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", token, "--json", "-c", "load mlp 1")
    state = json.loads(out) if rc == 0 else {}
    if state.get("state") != "ready" or state.get("replicas") != 1:
        raise Failure(f"a load with the token: rc {rc}: {out} {err}")
    rc, out, err = console("--json", "-c", "replicas")
    where = json.loads(out).get("mlp/1", []) if rc == 0 else []
    if len(where) != 1:
        raise Failure(f"replicas: rc {rc}: {out} {err}")
    # Drain the node holding it: a replacement on the other first, then it may be stopped.
    held, other = where[0], "node2" if where[0] == "node1" else "node1"
    rc, out, err = console("--token-file", token, "-c", f"drain {held}", "-c", "nodes", "-c", "replicas")
    if rc != 0 or f"node {held} is drained (moved mlp/1)" not in out or "draining" not in out or \
            f"mlp/1  1         {other}" not in out:
        raise Failure(f"drain {held}: rc {rc}: {out} {err}")
    # Faults: only on a node that allows them, only with the token; each answered with what was done.
    rc, out, err = console("-c", "fault node1 kill router")
    if rc == 0 or "permission_denied" not in err:
        raise Failure(f"a fault without a token: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", token, "-c", "fault node2 kill router")
    if rc == 0 or "not started with --allow-faults" not in err:
        raise Failure(f"a fault on a node without --allow-faults: rc {rc}: {out} {err}")
    for cmd, says in (("fault node1 kill router", "killed router of node node1"),
                      ("fault node1 kill executor:0", "killed executor:0 of node node1"),
                      ("fault node1 delay router delay=200ms for=1s seed=3", "200 ms each, for 1000 ms, seed 3"),
                      ("fault node1 heal", "healed the router of node node1"),
                      ("fault node1 corrupt-chunk count=2", "the next 2 data frame(s) node node1 sends are corrupted"),
                      ("fault node1 throttle rate=1MB/s for=1s", "to 1000000 bytes/s for 1000 ms"),
                      ("fault node1 stall for=500ms", "stall the multicast hops of node node1 for 500 ms"),
                      ("fault node1 stop-heartbeats for=300ms", "answers no heartbeat for 300 ms")):
        rc, out, err = console("--token-file", token, "-c", cmd)
        if rc != 0 or says not in out:
            raise Failure(f"'{cmd}': rc {rc}, expected '{says}': {out} {err}")
    # The killed executor takes commands again once restarted (until then: "is restarting").
    wait_for("the restarted executor to take fail-alloc",
             lambda: "the next 2 allocation(s) on sim:0 fail" in
             console("--token-file", token, "-c", "fault node1 fail-alloc count=2")[1], 20)
    for cmd, says in (("fault node1 explode", "no fault kind 'explode'"), ("fault nosuch kill router", "no node named"),
                      ("fault node1 kill executor:7", "has executors 0..0"), ("fault node1 drop p=2", "probability"),
                      ("fault node1 stall", "needs a duration"), ("fault node1 throttle for=1s", "needs a rate")):
        rc, out, err = console("--token-file", token, "-c", cmd)
        if rc == 0 or says not in err:
            raise Failure(f"'{cmd}': rc {rc}, expected '{says}': {out} {err}")
    rc, out, err = console("--token-file", token, "-c", "log-level debug", "-c", "log-level info")
    if rc != 0 or out.count("in 3 process(es)") != 2:
        raise Failure(f"log-level: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", token, "-c", "log-level loud")
    if rc == 0 or "no log level 'loud'" not in err:
        raise Failure(f"a bad log level: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", token, "-c", "scale mlp 1 2")
    if rc == 0 or "the autoscaler is off" not in err:
        raise Failure(f"scale with the autoscaler off: rc {rc}: {out} {err}")
    # slo: set on every replica (the models table and --json show it), then cleared.
    rc, out, err = console("--token-file", token, "-c", "slo mlp 250ms p=99", "-c", "models")
    if rc != 0 or "mlp/1: SLO 250ms at p99 (set)" not in out or "250ms at p99 (set)" not in out.split("MODEL")[1]:
        raise Failure(f"slo: rc {rc}: {out} {err}")
    rc, out, err = console("--json", "-c", "models")
    mlp = [m for m in json.loads(out) if m["name"] == "mlp"][0]
    if rc != 0 or mlp["slo_deadline_us"] != 250000 or abs(mlp["slo_percentile"] - 0.99) > 1e-9 or not mlp["slo_set"]:
        raise Failure(f"slo in models --json: rc {rc}: {out} {err}")
    rc, out, err = console("--token-file", token, "-c", "slo mlp off")
    if rc != 0 or "SLO cleared" not in out:
        raise Failure(f"slo off: rc {rc}: {out} {err}")
    for bad, says in (("slo mlp fast", "is not a deadline"), ("slo mlp 1s p=100", "is not p=PERCENTILE"),
                      ("slo nosuch 1s", "unknown model 'nosuch'")):
        rc, out, err = console("--token-file", token, "-c", bad)
        if rc == 0 or says not in err:
            raise Failure(f"'{bad}': rc {rc}, expected '{says}': {out} {err}")
    rc, out, err = console("-c", "slo mlp 1s")
    if rc == 0 or "admin token" not in err:
        raise Failure(f"slo without the token: rc {rc}: {out} {err}")

    for bad, says in (("bogus", "unknown command 'bogus'"), ("load", "usage: load MODEL[/VERSION] [REPLICAS]"),
                      ("load mlp/x", "is not a version"), ("unload nosuch", "unknown model 'nosuch'")):
        rc, out, err = console("--token-file", token, "-c", bad)
        if rc == 0 or says not in err:
            raise Failure(f"'{bad}': rc {rc}, expected '{says}': {out} {err}")

    # A script on stdin: every line runs, the exit code says one failed.
    rc, out, err = console("--token-file", token, stdin="models\nbogus\nunload mlp\nmodels\n")
    if rc != 1 or out.count("MODEL") != 2 or "unloaded by request" not in out:
        raise Failure(f"a script: rc {rc}: {out} {err}")

    # Interactive, through a pseudo-terminal: Tab completes "mod" to "models".
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(ember, [ember, "--log-level", "warn", "console", "--manager", manager], env)
    seen = b""

    def read_until(what, seconds):
        nonlocal seen
        deadline = time.time() + seconds
        while what not in seen and time.time() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        if what not in seen:
            raise Failure(f"the interactive console did not show {what!r}: {seen[-800:]!r}")

    read_until(b"ember> ", 20)
    os.write(fd, b"mod\t")
    read_until(b"els", 10)  # the completion's rest, however the terminal redraws the line
    os.write(fd, b"\r")
    read_until(b"REPLICAS", 10)
    os.write(fd, b"quit\r")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise Failure(f"the interactive console exited with {status}")
    with open(os.path.join(work, ".ember_history")) as f:
        if "models" not in f.read():
            raise Failure("the history file does not hold the command")

    with open(os.path.join(work, "node1.log")) as f:
        log = f.read()
    for line in ("fault injected: kill router", "its router died", "its executor 0 died",
                 "fault injected: delay the router's messages", "fault delay on the router healed"):
        if line not in log:
            raise Failure(f"node1 did not log '{line}'")
    with open(os.path.join(work, "manager.log")) as f:
        log = f.read()
    for line in ("tester@", "asked: load mlp with 1 replicas", "asked: fault node1 kill router", "asked: unload mlp", "refused: wrong or missing",
                 "asked: drain", "is drained (1 replica(s) moved)"):
        if line not in log:
            raise Failure(f"the manager did not log '{line}'")


def run(ember):
    return run_guarded("ember-console-", lambda work, procs, logs: _body(ember, work, procs, logs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    return run(ap.parse_args().ember)


if __name__ == "__main__":
    sys.exit(main())
