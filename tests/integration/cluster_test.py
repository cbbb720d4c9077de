#!/usr/bin/python3
"""Multi-process integration test: a manager (with the HTTP gateway) and three `ember node` processes
on loopback, three models loaded, concurrent clients, and one node killed with SIGKILL in the middle.

Every request must either succeed with the right output (compared with running the same model and
input directly with `ember run`) or get a clear retryable error (HTTP 503/504 with a JSON "error");
no request may hang or go unanswered, and afterwards the surviving cluster must serve every model,
including those the killed node held.

Usage: cluster_test.py --ember PATH [--clients 6] [--requests 600]
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ember_torch  # noqa: E402  (safetensors and input helpers; torch is not needed)
from ports import free_port  # noqa: E402,F401  (re-exported to the scenario tests)
from procs import Failure, wait_for  # noqa: E402,F401  (re-exported to the scenario tests)
import numpy as np  # noqa: E402

MODELS = {"mlp": ("mlp", 11), "bert": ("bert-base", 12), "resnet": ("resnet50", 13)}
KSERVE = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}



def request(port, method, path, body=None, timeout=60):
    """`port` on loopback, or a (host, port) pair."""
    host, port = port if isinstance(port, tuple) else ("127.0.0.1", port)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else "{}",
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def make_cases(ember, work):
    """Per model: a few inputs and the outputs `ember run` computes for them directly."""
    repo = os.path.join(work, "repo")
    cases = {}
    for name, (arch, seed) in MODELS.items():
        d = os.path.join(repo, name, "1")
        subprocess.run([ember, "model", "new", "--arch", arch, "--tiny", "--seed", str(seed), "--out", d],
                       check=True, capture_output=True)
        cases[name] = []
        for k, (batch, seq) in enumerate([(1, 4), (2, 6), (1, 9)]):
            inputs = ember_torch.random_inputs(arch, True, batch=batch, seq_len=seq, seed=100 * seed + k)
            fin, fout = os.path.join(work, f"{name}-{k}-in.safetensors"), os.path.join(work, f"{name}-{k}-out.safetensors")
            ember_torch.write_safetensors(fin, inputs.items())
            subprocess.run([ember, "--log-level", "warn", "run", d, "--input", fin, "--output", fout, "--repeat", "0",
                            "--device", "sim", "--threads", "1"], check=True, capture_output=True)
            body = {"inputs": [{"name": n, "datatype": KSERVE[a.dtype], "shape": list(a.shape),
                                "data": a.reshape(-1).tolist()} for n, a in inputs.items()]}
            cases[name].append((body, ember_torch.read_safetensors(fout)))
    return repo, cases


def compare_outputs(got, expected):
    """Raises Failure unless every expected output (name -> array) is in `got` with its shape and within
    1e-5 of its largest magnitude."""
    for name, want in expected.items():
        if name not in got:
            raise Failure(f"output {name} missing from {list(got)}")
        scale = max(float(np.max(np.abs(want))), 1e-12)
        err = float(np.max(np.abs(got[name] - want))) / scale
        if got[name].shape != want.shape or err > 1e-5:
            raise Failure(f"output {name} differs from the direct run: shape {got[name].shape} vs {want.shape}, "
                          f"relative error {err:.2e}")


def check_answer(status, text, expected):
    """'ok', 'retryable' or raises Failure with what is wrong."""
    if status == 200:
        reply = json.loads(text)
        compare_outputs({o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"])
                         for o in reply["outputs"]}, expected)
        return "ok"
    try:
        message = json.loads(text).get("error", "")
    except ValueError:
        raise Failure(f"HTTP {status} without a JSON error body: {text[:200]}")
    if status in (503, 504) and message:
        return "retryable"
    raise Failure(f"HTTP {status}: {message}")


def node_replicas(port):
    status, text = request(port, "GET", "/metrics")
    out = {}
    for m in re.finditer(r'^ember_replicas\{node="([^"]+)"\} (\S+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def metric(port, name, **labels):
    """The sum of a metric's series whose labels include `labels`."""
    status, text = request(port, "GET", "/metrics")
    total = 0.0
    for m in re.finditer(r"^" + name + r"\{([^}]*)\} (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def print_log_tails(work, logs, lines):
    """The last `lines` lines of each process's log (`logs`: name -> open file in `work`)."""
    for name, f in logs.items():
        f.flush()
        with open(os.path.join(work, name + ".log")) as log:
            tail = log.read().splitlines()[-lines:]
        print(f"--- {name}.log (last lines)\n" + "\n".join(tail))


class Load:
    """`per_port` clients per gateway port sending requests back to back until stop(), for `model` (a
    name, or a list of names taken in turn); every answer checked with check_answer(). Keeps each
    request as (start, end, outcome), outcome "ok", "retryable", "wrong" or "lost" (no answer), and
    the failures (wrong answers and requests without one) as messages."""

    def __init__(self, cases, model, ports, per_port, timeout=60):
        self.timeout = timeout  # a client waiting longer counts its request as lost
        self.records, self.failures = [], []
        self._stop, self._lock = threading.Event(), threading.Lock()
        models = [model] if isinstance(model, str) else sorted(model)
        self._threads = [threading.Thread(target=self._client, args=(cases, models, port, k), daemon=True)
                         for port in ports for k in range(per_port)]
        for t in self._threads:
            t.start()

    def _client(self, cases, models, port, index):
        host, port = port if isinstance(port, tuple) else ("127.0.0.1", port)  # a port, or (host, port)
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        i = index
        while not self._stop.is_set():
            model = models[i % len(models)]
            body, expected = cases[model][i % len(cases[model])]
            i += 1
            start = time.time()
            try:
                conn.request("POST", f"/v2/models/{model}/infer", body=json.dumps(body),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                outcome = check_answer(r.status, r.read().decode(), expected)
            except Failure as e:
                outcome = "wrong"
                with self._lock:
                    self.failures.append(f"gateway :{port}: {e}")
            except (OSError, http.client.HTTPException) as e:
                outcome = "lost"
                with self._lock:
                    self.failures.append(f"gateway :{port}: no answer: {type(e).__name__}: {e}")
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            with self._lock:
                self.records.append((start, time.time(), outcome))

    def count(self, outcome, after=0.0):
        """Requests with that outcome answered after `after` (a time.time())."""
        with self._lock:
            return sum(1 for _, end, o in self.records if o == outcome and end > after)

    def stop(self):
        """Stops the clients; a client still waiting after 120 s is a hung request (Failure)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
            if t.is_alive():
                raise Failure("a client is still waiting after 120 s: a request hangs")


class LocalCluster:
    """A manager with the HTTP gateway and an admin token file, and `nodes` `ember node` processes
    (node1..nodeN) on loopback, started in `work` into `procs`/`logs` (as run_guarded passes them).
    `config` is YAML appended to the manager's config file (which sets manager.admin_token_file);
    `node_args` are added to every node's command line."""

    def __init__(self, ember, work, procs, logs, repo, nodes, config="", node_args=(), manager_args=()):
        self.ember, self.work, self.procs, self.logs = ember, work, procs, logs
        self.token = os.path.join(work, "admin.token")
        with open(self.token, "w") as f:
            f.write("local-cluster-token\n")
        self.config = os.path.join(work, "ember.yaml")
        with open(self.config, "w") as f:
            f.write(f"manager:\n  admin_token_file: {self.token}\n" + config)
        mport, self.http = free_port(), free_port()
        self.manager = f"127.0.0.1:{mport}"
        self.node_args = list(node_args)
        self.manager_args = ["manager", "--config", self.config, "--listen", self.manager, "--repository", repo,
                             "--http", f"127.0.0.1:{self.http}", *manager_args]
        self.spawn("manager", self.manager_args)
        wait_for("the gateway", lambda: request(self.http, "GET", "/v2/health/ready")[0] == 200, 20)
        self.names = [f"node{i + 1}" for i in range(nodes)]
        for n in self.names:
            self.spawn_node(n)
        wait_for(f"{nodes} nodes", lambda: len(node_replicas(self.http)) == nodes, 30)

    def spawn(self, name, args):
        if name in self.logs:
            self.logs[name].close()
        self.logs[name] = open(os.path.join(self.work, name + ".log"), "a")
        self.procs[name] = subprocess.Popen([self.ember, *args], stdout=self.logs[name], stderr=subprocess.STDOUT)

    def restart_manager(self, outage):
        """SIGKILLs the manager, waits `outage` seconds, starts it again with the same arguments."""
        self.procs["manager"].kill()
        self.procs["manager"].wait()
        time.sleep(outage)
        self.spawn("manager", self.manager_args)
        wait_for("the restarted gateway", lambda: request(self.http, "GET", "/v2/health/ready")[0] == 200, 20)

    def spawn_node(self, name):
        self.spawn(name, ["node", "--manager", self.manager, "--name", name, "--device-memory", "512MiB",
                          "--cache", "512MiB", "--threads", "1", *self.node_args])

    def console(self, *commands):
        """`ember console -c ...` with the admin token: (exit code, stdout, stderr)."""
        args = [a for c in commands for a in ("-c", c)]
        r = subprocess.run([self.ember, "--log-level", "warn", "console", "--manager", self.manager, "--token-file",
                            self.token, *args], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout, r.stderr

    def load(self, model, replicas):
        status, text = request(self.http, "POST", f"/v2/repository/models/{model}/load",
                               {"parameters": {"replicas": replicas}})
        if status != 200:
            raise Failure(f"load {model}: HTTP {status} {text}")


class Spawner:
    """Starts processes into `procs` (name -> Popen) with their output in `work`/NAME.log (`logs`: name ->
    open file), as run_guarded passes them; log(name) reads a log so far."""

    def __init__(self, program, work, procs, logs):
        self.program, self.work, self.procs, self.logs = program, work, procs, logs

    def spawn(self, name, args, program=None):
        if name in self.logs:
            self.logs[name].close()
        self.logs[name] = open(os.path.join(self.work, name + ".log"), "a")
        self.procs[name] = subprocess.Popen([program or self.program, *args], stdout=self.logs[name],
                                            stderr=subprocess.STDOUT)

    def log(self, name):
        self.logs[name].flush()
        with open(os.path.join(self.work, name + ".log")) as f:
            return f.read()

    def start_etcd(self, etcd="/usr/bin/etcd"):
        """One etcd member on free loopback ports (data in `work`/etcd): its client port."""
        client, peer = free_port(), free_port()
        self.spawn("etcd", ["--data-dir", os.path.join(self.work, "etcd"), "--listen-client-urls",
                            f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
                            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
                            f"http://127.0.0.1:{peer}", "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
                   program=etcd)
        return client

    def leader(self, names):
        """Of the managers `names` (sharing etcd), the running one that logged last that it leads."""
        best = None
        for name in names:
            if name not in self.procs or self.procs[name].poll() is not None:
                continue
            led = re.findall(r"^(\S+) .*manager \S+: leads", self.log(name), re.M)
            if led and (best is None or led[-1] > best[0]):
                best = (led[-1], name)
        return best[1] if best else None


def run_guarded(prefix, body, tail_lines=20):
    """Runs body(work, procs, logs) in a fresh work folder (procs: name -> Popen, logs: name -> open
    file, both filled by the body): prints PASS, or FAIL with the logs' last lines; every process is
    stopped and the folder removed either way. Returns the exit code."""
    work = tempfile.mkdtemp(prefix=prefix)
    procs, logs = {}, {}
    try:
        body(work, procs, logs)
        print("PASS")
        return 0
    except (Failure, subprocess.TimeoutExpired, ValueError) as e:
        print(f"FAIL: {e}")
        print_log_tails(work, logs, tail_lines)
        return 1
    finally:
        stop_all(procs, work)


def stop_all(procs, work):
    """Kills the processes still running, reaps them all and removes the work folder (kept, and named,
    when EMBER_KEEP_WORK is set: its logs, to read after a run that passed)."""
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    for p in procs.values():
        p.wait()
    if os.environ.get("EMBER_KEEP_WORK"):
        print(f"kept {work}")
        return
    shutil.rmtree(work, ignore_errors=True)


def secure_config(ember, work):
    """--config for a cluster with mutual TLS on the control plane (a certificate per process from
    `ember certs`, all from one CA) and tickets on the data plane: {process name: [--config, file]}."""
    d = os.path.join(work, "certs")
    subprocess.run([ember, "certs", "init", "--dir", d], check=True, capture_output=True)
    with open(os.path.join(d, "tickets.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    out = {}
    for name in ("manager", "node1", "node2", "node3"):
        subprocess.run([ember, "certs", "issue", "--dir", d, "--name", name, "--role",
                        "manager" if name == "manager" else "node", "--san", "127.0.0.1"],
                       check=True, capture_output=True)
        path = os.path.join(work, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(f"security:\n  tls_certificate: {d}/{name}.crt\n  tls_key: {d}/{name}.key\n"
                    f"  tls_ca: {d}/ca.crt\n  ticket_key_file: {d}/tickets.key\n")
        out[name] = ["--config", path]
    return out


def run(ember, clients, total, secure=False):
    work = tempfile.mkdtemp(prefix="ember-cluster-")
    procs = {}
    logs = {}
    try:
        repo, cases = make_cases(ember, work)
        mport, hport = free_port(), free_port()
        configs = secure_config(ember, work) if secure else {}

        def spawn(name, args):
            logs[name] = open(os.path.join(work, name + ".log"), "w")
            procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

        spawn("manager", ["manager", "--listen", f"127.0.0.1:{mport}", "--repository", repo, "--http",
                          f"127.0.0.1:{hport}", "--node-timeout", "2s", "--cold-start-timeout", "20s",
                          *configs.get("manager", [])])
        wait_for("the gateway", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 20)
        for i in (1, 2, 3):
            spawn(f"node{i}", ["node", "--manager", f"127.0.0.1:{mport}", "--name", f"node{i}", "--device-memory",
                               "512MiB", "--cache", "512MiB", "--threads", "1", *configs.get(f"node{i}", [])])
        wait_for("three nodes", lambda: len(node_replicas(hport)) == 3, 30)
        for name in MODELS:
            status, text = request(hport, "POST", f"/v2/repository/models/{name}/load")
            if status != 200:
                raise Failure(f"load {name}: HTTP {status} {text}")
        placement = node_replicas(hport)
        print("replicas per node after loading:", placement)

        counts = {"ok": 0, "retryable": 0}
        failures = []
        done = [0]
        lock = threading.Lock()
        killed = threading.Event()
        victim = max(placement, key=lambda n: placement[n])  # a node that holds replicas

        def client(index):
            conn = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
            names = sorted(MODELS)
            i = index
            while True:
                with lock:
                    if done[0] >= total:
                        break
                    done[0] += 1
                    n = done[0]
                if n == total // 3 and not killed.is_set():
                    os.kill(procs[victim].pid, signal.SIGKILL)
                    killed.set()
                    print(f"killed {victim} (pid {procs[victim].pid}) after {n} requests")
                name = names[i % len(names)]
                body, expected = cases[name][(i // len(names)) % len(cases[name])]
                i += 1
                try:
                    conn.request("POST", f"/v2/models/{name}/infer", body=json.dumps(body),
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    outcome = check_answer(r.status, r.read().decode(), expected)
                except Failure as e:
                    with lock:
                        failures.append(f"{name}: {e}")
                    continue
                except (OSError, http.client.HTTPException) as e:  # a hang shows up here as a timeout
                    with lock:
                        failures.append(f"{name}: no answer: {type(e).__name__}: {e}")
                    conn = http.client.HTTPConnection("127.0.0.1", hport, timeout=60)
                    continue
                with lock:
                    counts[outcome] += 1
            conn.close()

        start = time.time()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
            if t.is_alive():
                raise Failure("a client thread is still waiting after 300 s: a request hangs")
        elapsed = time.time() - start
        print(f"{total} requests from {clients} clients in {elapsed:.1f} s: {counts['ok']} correct, "
              f"{counts['retryable']} retryable errors, {len(failures)} failures")
        if failures:
            raise Failure(f"{len(failures)} bad answers, e.g.: " + "; ".join(failures[:5]))
        if not killed.is_set():
            raise Failure("the node was never killed")
        if counts["ok"] < total // 2:
            raise Failure(f"only {counts['ok']} of {total} requests succeeded")

        # The survivors serve everything, including what the killed node held.
        for name in MODELS:
            body, expected = cases[name][0]

            def served():
                status, text = request(hport, "POST", f"/v2/models/{name}/infer", body)
                return check_answer(status, text, expected) == "ok"

            wait_for(f"{name} served after the kill", served, 30)
        print("after the kill:", node_replicas(hport))
        with open(os.path.join(work, "manager.log")) as f:
            log = f.read()
        if f"node {victim}" not in log or "lost" not in log:
            raise Failure("the manager did not log the lost node")
        print("PASS")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        print_log_tails(work, logs, 15)
        return 1
    finally:
        stop_all(procs, work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--secure", action="store_true",
                    help="mutual TLS on the control plane and tickets on the data plane, every process")
    args = ap.parse_args()
    return run(args.ember, args.clients, args.requests, args.secure)


if __name__ == "__main__":
    sys.exit(main())
