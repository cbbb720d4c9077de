#!/usr/bin/python3
"""Emulated multi-host integration test: deploy/netns-cluster.sh puts the manager and three `ember node`
processes in network namespaces of their own, joined by a bridge through 1 Gbit/s rate-limited links.

Two models are loaded through the KServe repository API and served; every answer must match `ember
run` on the same model and input (as in cluster_test.py). The test also checks that each process runs
in its host's namespace, that every host link carries the rate-limiting qdisc, and that `down` leaves
no namespace, link or process behind. Needs root and network namespaces; otherwise it prints
"SKIPPED: <reason>" and exits 77 (CTest's SKIP_RETURN_CODE).

Usage: netns_cluster_test.py --ember PATH
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "deploy", "netns-cluster.sh"))
SKIP = 77
HOSTS = 3
RATE = "1gbit"
GATEWAY = ("10.231.0.1", 8000)
MODELS = {"alpha": ("mlp", 21), "beta": ("mlp", 22)}  # name -> (arch, seed)


def skip(reason):
    print(f"SKIPPED: {reason}")
    return SKIP


try:  # cluster_test.py's helpers (and through it tools/ember_torch.py, which needs numpy)
    sys.path.insert(0, HERE)
    from cluster_test import KSERVE, Failure, check_answer, ember_torch, wait_for
except ImportError as e:
    if __name__ == "__main__":
        sys.exit(skip(f"cluster_test.py's helpers are not importable by {sys.executable}: {e}"))
    raise


def sh(args, timeout=30, check=True, env=None):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise Failure(f"{' '.join(args)} exited {r.returncode}: {(r.stdout + r.stderr).strip()[-1500:]}")
    return r.stdout


def request(method, path, body=None, timeout=30):
    conn = http.client.HTTPConnection(*GATEWAY, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else "{}",
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def why_skip(ember):
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, bridge, tc)"
    if not os.access(ember, os.X_OK):
        return f"no ember binary at {ember}"
    for tool in ("ip", "tc", "curl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"ember-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return f"'ip netns add' is not permitted here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def cluster_namespaces():
    return [line.split()[0] for line in sh(["ip", "netns", "list"]).splitlines()
            if line.split() and line.split()[0].startswith("ember-h")]


def alive(pid):  # a zombie counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_namespaces(pids):
    own = os.readlink("/proc/self/ns/net")
    for name, pid in pids.items():
        want = "ember-h0" if name == "manager" else "ember-" + name
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "ember":
            raise Failure(f"{name}: pid {pid} is {os.readlink(f'/proc/{pid}/exe')}, not ember")
        ns = os.readlink(f"/proc/{pid}/ns/net")
        identified = sh(["ip", "netns", "identify", str(pid)]).strip()
        if ns == own or identified != want:
            raise Failure(f"{name} (pid {pid}) runs in {ns} = '{identified}', expected namespace {want} "
                          f"(the test runs in {own})")
    print(f"{len(pids)} processes, each in its own namespace:",
          ", ".join(f"{n}={p}" for n, p in pids.items()))


def check_qdiscs():
    for i in range(HOSTS + 1):
        for where, cmd in ((f"ember-h{i} eth0", ["tc", "-n", f"ember-h{i}", "qdisc", "show", "dev", "eth0"]),
                           (f"ember-v{i}", ["tc", "qdisc", "show", "dev", f"ember-v{i}"])):
            out = sh(cmd)
            if not any("tbf" in line and "rate 1Gbit" in line for line in out.splitlines()):
                raise Failure(f"no tbf qdisc with rate 1Gbit on {where}: {out.strip()}")
    print(f"tbf rate 1Gbit on both sides of all {HOSTS + 1} host links")


def run(ember):
    work = tempfile.mkdtemp(prefix="ember-netns-")
    state = os.path.join(work, "state")
    env = dict(os.environ, EMBER=ember)
    started = False
    pids = {}
    start = time.time()
    try:
        if cluster_namespaces():
            raise Failure("ember-h* namespaces exist already: a cluster is up (deploy/netns-cluster.sh down); "
                          "not touching it")
        repo = os.path.join(work, "repo")
        cases = {}
        for name, (arch, seed) in MODELS.items():
            d = os.path.join(repo, name, "1")
            sh([ember, "model", "new", "--arch", arch, "--tiny", "--seed", str(seed), "--out", d])
            cases[name] = []
            for k, (batch, seq) in enumerate([(1, 4), (3, 7)]):
                inputs = ember_torch.random_inputs(arch, True, batch=batch, seq_len=seq, seed=100 * seed + k)
                fin, fout = (os.path.join(work, f"{name}-{k}-{io}.safetensors") for io in ("in", "out"))
                ember_torch.write_safetensors(fin, inputs.items())
                sh([ember, "--log-level", "warn", "run", d, "--input", fin, "--output", fout, "--repeat", "0",
                    "--device", "sim", "--threads", "1"])
                body = {"inputs": [{"name": n, "datatype": KSERVE[a.dtype], "shape": list(a.shape),
                                    "data": a.reshape(-1).tolist()} for n, a in inputs.items()]}
                cases[name].append((body, ember_torch.read_safetensors(fout)))

        started = True
        t = time.time()
        print(sh(["bash", SCRIPT, "up", str(HOSTS), "--rate", RATE, "--repository", repo, "--dir", state, "--",
                  "--device-memory", "512MiB", "--cache", "512MiB", "--threads", "1"], timeout=45, env=env).strip())
        print(f"up in {time.time() - t:.1f} s")
        for line in sh(["bash", SCRIPT, "pids", "--dir", state]).splitlines():
            name, pid = line.split()
            pids[name] = int(pid)
        if sorted(pids) != sorted(["manager"] + [f"h{i}" for i in range(1, HOSTS + 1)]):
            raise Failure(f"`pids` printed {pids}")
        check_namespaces(pids)
        check_qdiscs()

        for name in MODELS:
            status, text = request("POST", f"/v2/repository/models/{name}/load")
            if status != 200:
                raise Failure(f"load {name}: HTTP {status} {text}")
        for name in MODELS:  # the first answer may wait for the replica; then every one must be right
            body, expected = cases[name][0]
            wait_for(f"{name} served", lambda: check_answer(*request("POST", f"/v2/models/{name}/infer", body),
                                                            expected) == "ok", 20)
        served = 0
        for _ in range(3):
            for name in MODELS:
                for body, expected in cases[name]:
                    outcome = check_answer(*request("POST", f"/v2/models/{name}/infer", body), expected)
                    if outcome != "ok":
                        raise Failure(f"{name}: a retryable error from a warm cluster")
                    served += 1
        print(f"{served} answers through the gateway match `ember run`")
        status, text = request("GET", "/metrics")
        replicas = sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("ember_replicas{"))
        if replicas < len(MODELS):
            raise Failure(f"{replicas:g} replicas on the nodes for {len(MODELS)} loaded models")

        print(sh(["bash", SCRIPT, "down", "--dir", state], timeout=30).strip())
        left = cluster_namespaces()
        if left:
            raise Failure(f"namespaces left after down: {left}")
        links = [line for line in sh(["ip", "-o", "link", "show"]).splitlines() if "ember-" in line]
        if links:
            raise Failure(f"links left after down: {links}")
        running = [f"{n}={p}" for n, p in pids.items() if alive(p)]
        if running:
            raise Failure(f"processes left after down: {running}")
        if any(f.endswith(".pid") for f in os.listdir(state)):
            raise Failure(f"pid files left after down: {os.listdir(state)}")
        print(f"down left nothing behind; {time.time() - start:.1f} s in all")
        print("PASS")
        return 0
    except (Failure, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}")
        for log in sorted(os.listdir(state)) if os.path.isdir(state) else []:
            if log.endswith(".log"):
                with open(os.path.join(state, log)) as f:
                    print(f"--- {log} (last lines)\n" + "\n".join(f.read().splitlines()[-15:]))
        return 1
    finally:
        if started:
            subprocess.run(["bash", SCRIPT, "down", "--dir", state], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    args = ap.parse_args()
    reason = why_skip(args.ember)
    if reason:
        return skip(reason)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that `down` still runs
    return run(os.path.abspath(args.ember))


if __name__ == "__main__":
    sys.exit(main())
