#!/usr/bin/python3
"""Multi-process partitioned cold start (issue 14): a manager (with the HTTP gateway) and three `ember
node` processes on loopback; a GPT-2 (tiny) with its profile.json that no node holds is loaded with
three replicas. The manager cuts it into stages on the three nodes; the load answers as soon as the
pipeline serves; requests go through the pipeline while each node fetches the rest of the model in
the background (slowly: autoscale.completion_rate), and then, in one routing update, through three
full replicas.

Two clients send requests from the load's answer until well after the switch-over: every answer
must be right (compared with `ember run` on the same input), none lost or refused. Checked: the
manager logged the pipeline and the completion, the gateway counted requests through the pipeline,
every node loaded a stage first, and three replicas serve at the end.

With --kill, the node holding the middle stage is killed (SIGKILL) while the pipeline serves: the
pipeline dissolves, requests in it are retried by the gateway (still none lost or wrong), and the two
survivors complete into full replicas.

With --kill-manager, the clients call a standalone `ember gateway` and the manager is killed (SIGKILL)
while the pipeline serves: each node has dialed the others (checked in their logs) and requests keep
going through the pipeline while the manager is away, every one answered right; the manager is then
restarted and the answers go on. (It does not tell which connection carries a hand-off: without the
dials, CAF routed them through the standalone gateway's process, and this test passed too.)

With --secure, every process has its own certificate from one cluster CA (mutual TLS on the control
plane), the data plane is TLS with tickets, and tickets are bound to certificates
(security.ticket_receiver: certificate): the stages' loads from the repository, the hand-offs of
activations between stages (each ticketed for the next stage's node) and the completions all pass the
blob servers' check that the receiver's certificate names the ticket's receiver.

Usage: pipeline_test.py --ember PATH [--kill | --kill-manager | --secure]
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import ember_torch  # noqa: E402
from cluster_test import (KSERVE, Failure, check_answer, free_port, metric, node_replicas,  # noqa: E402
                          print_log_tails, request, stop_all, wait_for)

# Slow links in the plan make cutting this small model pay; a slow completion keeps the pipeline
# serving for a few seconds.
CONFIG = """
autoscale:
  enabled: false
  partition_stages: 3
  partition_bandwidth: 1MB/s
  completion_rate: 150KB/s
"""


def make_case(ember, work):
    d = os.path.join(work, "repo", "gpt2", "1")
    subprocess.run([ember, "model", "new", "--arch", "gpt2", "--tiny", "--seed", "31", "--out", d],
                   check=True, capture_output=True)
    subprocess.run([ember, "--log-level", "warn", "model", "profile", d, "--batches", "1"], check=True,
                   capture_output=True)
    inputs = ember_torch.random_inputs("gpt2", True, batch=1, seq_len=6, seed=3100)
    fin, fout = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    ember_torch.write_safetensors(fin, inputs.items())
    subprocess.run([ember, "--log-level", "warn", "run", d, "--input", fin, "--output", fout, "--repeat", "0",
                    "--device", "sim", "--threads", "1"], check=True, capture_output=True)
    body = {"inputs": [{"name": n, "datatype": KSERVE[a.dtype], "shape": list(a.shape),
                        "data": a.reshape(-1).tolist()} for n, a in inputs.items()]}
    return os.path.join(work, "repo"), body, ember_torch.read_safetensors(fout)


def secure_configs(ember, work, names):
    """{process name: config file}: CONFIG plus a `security:` section with the process's own
    certificate (CN = its name), the cluster CA, the ticket key, TLS on the data plane and tickets
    bound to certificates."""
    d = os.path.join(work, "certs")
    subprocess.run([ember, "certs", "init", "--dir", d], check=True, capture_output=True)
    for name in names:
        role = "manager" if name == "manager" else "node"
        subprocess.run([ember, "certs", "issue", "--dir", d, "--name", name, "--role", role, "--san", "127.0.0.1"],
                       check=True, capture_output=True)
    with open(os.path.join(d, "tickets.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    out = {}
    for name in names:
        out[name] = os.path.join(work, f"{name}.yaml")
        with open(out[name], "w") as f:
            f.write(CONFIG + "security:\n" + "".join(f"  {k}: {os.path.join(d, v)}\n" for k, v in (
                ("tls_certificate", f"{name}.crt"), ("tls_key", f"{name}.key"), ("tls_ca", "ca.crt"),
                ("ticket_key_file", "tickets.key"))) + "  data_plane: tls\n  ticket_receiver: certificate\n")
    return out


def run(ember, kill, kill_manager=False, secure=False):
    work = tempfile.mkdtemp(prefix="ember-pipeline-")
    procs, logs = {}, {}
    try:
        repo, body, expected = make_case(ember, work)
        config = os.path.join(work, "ember.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        configs = secure_configs(ember, work, ["manager", "node1", "node2", "node3"]) if secure else {}
        mport, hport = free_port(), free_port()

        def spawn(name, args):
            logs[name] = open(os.path.join(work, name + ".log"), "w")
            if name in configs:
                args = [a if a != config else configs[name] for a in args]
                if "--config" not in args:
                    args += ["--config", configs[name]]
            procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

        def log_of(name):
            logs[name].flush()
            with open(os.path.join(work, name + ".log")) as f:
                return f.read()

        def start_manager():
            spawn("manager", ["manager", "--config", config, "--listen", f"127.0.0.1:{mport}", "--repository", repo,
                              "--http", f"127.0.0.1:{hport}", "--node-timeout", "2s", "--cold-start-timeout", "20s"])
            wait_for("the gateway", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 20)

        start_manager()
        for i in (1, 2, 3):
            spawn(f"node{i}", ["node", "--manager", f"127.0.0.1:{mport}", "--name", f"node{i}", "--device-memory",
                               "512MiB", "--cache", "512MiB", "--threads", "1"])
        wait_for("three nodes", lambda: len(node_replicas(hport)) == 3, 30)
        cport = hport  # where the clients send their requests
        if kill_manager:
            cport = free_port()
            spawn("gateway", ["gateway", "--config", config, "--manager", f"127.0.0.1:{mport}", "--http",
                              f"127.0.0.1:{cport}", "--node-timeout", "2s"])
            wait_for("the standalone gateway", lambda: request(cport, "GET", "/v2/health/ready")[0] == 200, 30)
            wait_for("its direct connections to the three nodes", lambda: log_of("gateway").count("directly") >= 3, 30)
            wait_for("the nodes' connections to each other",
                     lambda: all(log_of(f"node{i}").count("connected to peer") >= 2 for i in (1, 2, 3)), 30)

        t0 = time.time()
        status, text = request(hport, "POST", "/v2/repository/models/gpt2/load", {"parameters": {"replicas": 3}})
        if status != 200:
            raise Failure(f"load answered HTTP {status}: {text}")
        loaded = time.time() - t0

        answers, failures, first = [], [], []
        stop = threading.Event()

        def client():
            c = http.client.HTTPConnection("127.0.0.1", cport, timeout=60)
            while not stop.is_set():
                try:
                    c.request("POST", "/v2/models/gpt2/infer", body=json.dumps(body),
                              headers={"Content-Type": "application/json"})
                    r = c.getresponse()
                    text = r.read().decode()
                    if check_answer(r.status, text, expected) != "ok":
                        raise Failure(f"refused (HTTP {r.status}, retryable): {text[:300]}")
                    if not first:
                        first.append(time.time() - t0)
                    answers.append(time.time())
                except (Failure, OSError, http.client.HTTPException) as e:
                    failures.append(f"{type(e).__name__}: {e}")
                    c = http.client.HTTPConnection("127.0.0.1", cport, timeout=60)

        threads = [threading.Thread(target=client) for _ in range(2)]
        for t in threads:
            t.start()
        killed = None
        try:
            if kill_manager:
                time.sleep(1.0)  # the pipeline serves; completion runs at 150KB/s
                before = metric(cport, "ember_pipeline_requests_total", model="gpt2")
                procs["manager"].kill()
                procs["manager"].wait()
                away = time.time()
                time.sleep(3.0)
                through = metric(cport, "ember_pipeline_requests_total", model="gpt2") - before
                served = sum(1 for t in answers if t > away)
                print(f"killed the manager after {before:.0f} requests through the pipeline; while it was away "
                      f"(3 s): {served} answers, {through:.0f} through the pipeline, {len(failures)} failures")
                if through < 10:
                    raise Failure(f"only {through:.0f} requests went through the pipeline while the manager was away")
                start_manager()
                back = time.time()
                wait_for("answers after the restart", lambda: sum(1 for t in answers if t > back + 1.0) >= 10, 30)
                stop.set()
                for t in threads:
                    t.join(timeout=120)
                if failures:
                    raise Failure(f"{len(failures)} requests lost, refused or wrong, e.g.: " + "; ".join(failures[:5]))
                print(f"{len(answers)} correct answers in all, none lost or wrong")
                print("PASS")
                return 0
            if kill:
                time.sleep(1.0)  # the pipeline serves; completion runs at 150KB/s
                m = re.search(r"gpt2/1 serves through a pipeline: \S+ \[[^)]*\) -> (node\d)", log_of("manager"))
                if not m:
                    raise Failure("no pipeline to kill a member of")
                killed = m.group(1)
                procs[killed].kill()
                print(f"killed {killed} (the middle stage) while the pipeline served")
            want = 2 if kill else 3
            wait_for(f"{want} full replicas", lambda: sum(v for n, v in node_replicas(hport).items() if n != killed) == want,
                     60)
            switched = time.time() - t0
            time.sleep(1.0)  # and a while after the switch-over
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
                if t.is_alive():
                    raise Failure("a client is still waiting after 120 s: a request hangs")

        through_pipeline = metric(hport, "ember_pipeline_requests_total", model="gpt2")
        handed_over = metric(hport, "ember_pipeline_handoff_bytes_total", transport="tcp")
        print(f"load answered after {loaded:.2f} s (the pipeline serves), first answer after "
              f"{first[0] if first else float('nan'):.2f} s, full replicas after {switched:.2f} s; "
              f"{len(answers)} correct answers, {through_pipeline:.0f} through the pipeline "
              f"({handed_over / 1e6:.1f} MB of activations handed between stages over the data plane), "
              f"{len(failures)} failures")
        if failures:
            raise Failure(f"{len(failures)} requests lost, refused or wrong, e.g.: " + "; ".join(failures[:5]))
        if through_pipeline < 1:
            raise Failure("no request went through the pipeline")
        if handed_over <= 0:
            raise Failure("the stages handed no tensors over the data plane")
        if through_pipeline >= len(answers):
            raise Failure("no request went to a full replica after the switch-over")
        log = log_of("manager")
        if kill:
            if "the others complete on their own" not in log:
                raise Failure("the manager did not dissolve the pipeline when a member was lost")
            print("PASS")
            return 0
        m = re.search(r"gpt2/1 serves through a pipeline: (.*)", log)
        if not m:
            raise Failure("the manager logged no pipeline")
        print("pipeline:", m.group(1).strip())
        if "gpt2/1 completed into 3 full replica(s)" not in log:
            raise Failure("the manager logged no completion into three replicas")
        for i in (1, 2, 3):
            if "loading pipeline stage gpt2#" not in log_of(f"node{i}"):
                raise Failure(f"node{i} loaded no pipeline stage")
        if secure:
            for name in logs:
                if "was presented with the certificate" in log_of(name):
                    raise Failure(f"a ticket was refused to its own receiver ({name}'s log):\n" + log_of(name)[-2000:])
            print("every process with its own certificate; tickets bound to certificates, none refused")
        print("PASS")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        print_log_tails(work, logs, int(os.environ.get("EMBER_LOG_LINES", "25")))
        return 1
    finally:
        stop_all(procs, work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--kill", action="store_true", help="kill the middle stage's node while the pipeline serves")
    ap.add_argument("--kill-manager", action="store_true",
                    help="kill the manager while the pipeline serves (clients call a standalone gateway)")
    ap.add_argument("--secure", action="store_true",
                    help="mutual TLS, TLS on the data plane, tickets bound to each process's own certificate")
    args = ap.parse_args()
    return run(args.ember, args.kill, args.kill_manager, args.secure)


if __name__ == "__main__":
    sys.exit(main())
