#!/usr/bin/python3
"""deploy/cluster.sh for real: three emulated hosts (network namespaces on a bridge, built by
`deploy/netns-cluster.sh net 2`), each running Debian's sshd on its own address with a throwaway host key
and a client key made here, and an inventory naming them: the manager (with the HTTP API) and a standalone
gateway on h0, a node on h1 and on h2, a config with security on every plane, from credentials the
inventory lists: bearer tokens and HTTPS on the API (gateway.api_tokens_file, tls_certificate), the admin
token (manager.admin_token_file, with open_reads: false), mutual TLS between the processes, and tickets
and TLS on the data plane (security.tls_*, ticket_key_file, data_plane: tls; one `ember certs` member certificate for all, since the
config is one file); console_args give `up`'s console the admin token and the certificate, curl_args the CA.

`cluster.sh up` must copy the binary, the config and the token file into each host's own directory, start
every role in its host's namespace, and wait until they are ready; the API refuses a request without the
token (401), plain HTTP, a console without the token and one without the certificate; it serves a model loaded through the repository API with it, and every answer matches `ember run`
on the same model and input, through the manager and through the gateway. `up` again changes nothing
(same pids, says so); a node killed (SIGKILL) is started again by `up`; `status` shows every role running
and ready; `logs` prints the roles' logs; `down` leaves no ember process and no pid file, and again finds
nothing to stop. Bad inventories (no manager, an unknown role, two nodes of one name, a host without an
address, a missing credential) fail with a message saying so, before touching any host.

Needs root, network namespaces and openssh-server (/usr/sbin/sshd); otherwise it prints "SKIPPED: <reason>"
and exits 77 (CTest's SKIP_RETURN_CODE). Not tested here: cluster.sh's systemd mode (no systemd).

Usage: cluster_ssh_test.py --ember PATH
"""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import ssl
import socket
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CLUSTER_SH = os.path.join(ROOT, "deploy", "cluster.sh")
NETNS_SH = os.path.join(ROOT, "deploy", "netns-cluster.sh")
SKIP = 77
HOSTS = 3  # h0: manager and gateway; h1, h2: a node each
NET = "10.231.0"
MANAGER_HTTP = (f"{NET}.1", 8000)
GATEWAY_HTTP = (f"{NET}.1", 8080)
TOKEN = "cluster-ssh-test-token-5f2a"


def skip(reason):
    print(f"SKIPPED: {reason}")
    return SKIP


try:  # cluster_test.py's helpers (and through it tools/ember_torch.py, which needs numpy)
    sys.path.insert(0, HERE)
    from cluster_test import KSERVE, Failure, check_answer, ember_torch, wait_for
    from netns_cluster_test import alive, cluster_namespaces, sh
except ImportError as e:
    if __name__ == "__main__":
        sys.exit(skip(f"cluster_test.py's helpers are not importable by {sys.executable}: {e}"))
    raise


def cluster(command, inventory, *extra, timeout=90):
    """Runs deploy/cluster.sh; returns (exit status, stdout + stderr)."""
    r = subprocess.run(["bash", CLUSTER_SH, command, inventory, *extra], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, TMPDIR=tempfile.gettempdir()))
    return r.returncode, (r.stdout + r.stderr).strip()


def cluster_ok(command, inventory, *extra, timeout=90):
    t = time.time()
    rc, out = cluster(command, inventory, *extra, timeout=timeout)
    print(f"$ cluster.sh {command} {' '.join(extra)}  ({time.time() - t:.1f} s)\n{out}")
    if rc != 0:
        raise Failure(f"cluster.sh {command} exited {rc}")
    return out


TLS = {}  # "ca": the cluster CA's certificate, once made (run): the API is HTTPS


def request(where, method, path, body=None, token=None, timeout=30):
    ctx = ssl.create_default_context(cafile=TLS["ca"]) if TLS else None
    conn = (http.client.HTTPSConnection(*where, timeout=timeout, context=ctx) if ctx
            else http.client.HTTPConnection(*where, timeout=timeout))
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else "{}", headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def why_skip(ember):
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, bridge, sshd)"
    if not os.access(ember, os.X_OK):
        return f"no ember binary at {ember}"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "openssh-server is not installed (/usr/sbin/sshd; deploy/setup.sh installs it)"
    for tool in ("ip", "tc", "curl", "ssh", "scp", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    r = subprocess.run(["python3", "-c", "import yaml"], capture_output=True)
    if r.returncode != 0:
        return "cluster.sh needs python3 with PyYAML (python3-yaml)"
    probe = f"ember-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return f"'ip netns add' is not permitted here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def processes_under(directory):
    """Live processes whose executable lies under directory (what cluster.sh started there)."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            exe = exe_of(int(p))
            if exe and exe.startswith(directory + "/") and alive(int(p)):
                found.append((int(p), exe))
    return found


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Hosts:
    """The three hosts: namespaces, sshd in each, the keys, and where cluster.sh puts each host's files."""

    def __init__(self, work):
        self.work = work
        self.ssh = os.path.join(work, "ssh")
        self.sshd = []
        self.net_up = False

    def dir(self, i):
        return os.path.join(self.work, "hosts", f"h{i}")

    def keys(self):
        os.makedirs(self.ssh, mode=0o700)
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.ssh, "host_key")])
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.ssh, "id_ed25519")])
        shutil.copy(os.path.join(self.ssh, "id_ed25519.pub"), os.path.join(self.ssh, "authorized_keys"))
        with open(os.path.join(self.ssh, "ssh_config"), "w") as f:  # cluster.sh runs ssh -F this
            f.write(f"StrictHostKeyChecking no\nUserKnownHostsFile {self.ssh}/known_hosts\nLogLevel ERROR\n")

    def start(self):
        print(sh(["bash", NETNS_SH, "net", str(HOSTS - 1)], timeout=30).strip())
        self.net_up = True
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        for i in range(HOSTS):
            cfg = os.path.join(self.ssh, f"sshd_config_h{i}")
            with open(cfg, "w") as f:
                f.write(f"""ListenAddress {NET}.{i + 1}:22
HostKey {self.ssh}/host_key
PidFile {self.ssh}/sshd-h{i}.pid
AuthorizedKeysFile {self.ssh}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
Subsystem sftp internal-sftp
""")
            sh(["/usr/sbin/sshd", "-t", "-f", cfg])
            log = open(os.path.join(self.ssh, f"sshd-h{i}.log"), "w")
            self.sshd.append(subprocess.Popen(["ip", "netns", "exec", f"ember-h{i}", "/usr/sbin/sshd", "-D", "-e",
                                               "-f", cfg], stdin=subprocess.DEVNULL, stdout=log, stderr=log))
            log.close()
        for i in range(HOSTS):
            def listening():
                with socket.create_connection((f"{NET}.{i + 1}", 22), timeout=1):
                    return True
            wait_for(f"sshd on {NET}.{i + 1}:22", listening, 10)
        print(f"sshd listening on {NET}.1..{NET}.{HOSTS}:22 in ember-h0..ember-h{HOSTS - 1}")

    def stop(self):
        for p in self.sshd:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        for pid, exe in processes_under(self.work):  # whatever a failed test left running
            print(f"killing leftover pid {pid} ({exe})")
            os.kill(pid, signal.SIGKILL)
        if self.net_up:
            subprocess.run(["bash", NETNS_SH, "down", "--dir", os.path.join(self.work, "netns")],
                           capture_output=True, timeout=30)

    def logs(self):
        paths = [os.path.join(self.ssh, f) for f in sorted(os.listdir(self.ssh)) if f.endswith(".log")] \
            if os.path.isdir(self.ssh) else []
        for i in range(HOSTS):
            d = os.path.join(self.dir(i), "log", f"h{i}")
            if os.path.isdir(d):
                paths += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".log")]
        for p in paths:
            with open(p, errors="replace") as f:
                print(f"--- {os.path.relpath(p, self.work)} (last lines)\n" + "\n".join(f.read().splitlines()[-15:]))


def write_inventory(path, hosts, repo, config, tokens, roles=None, drop=()):
    """The test's inventory (roles replaced, or top-level keys dropped, for the bad ones)."""
    certs = os.path.join(hosts.work, "certs")
    inv = {
        "cluster": "ssh-test",
        "binary": os.path.join(hosts.work, "ember"),
        "config": config,
        "credentials": [tokens, os.path.join(hosts.work, "admin.token")] +
                       [os.path.join(certs, f) for f in ("ca.crt", "member.crt", "member.key", "tickets.key")],
        # the manager's reads need the admin token (open_reads: false) and the control plane mutual TLS,
        # so `up` must pass both to its console
        "console_args": ["--token-file", "{dir}/credentials/admin.token"] + CONSOLE_TLS,
        # the API is HTTPS with a certificate the cluster CA signed: `up` checks readiness trusting it
        "curl_args": ["--cacert", os.path.join(certs, "ca.crt")],
        "ready_timeout": 30,
        "stop_timeout": 5,
        "ssh": {"user": "root", "identity_file": os.path.join(hosts.ssh, "id_ed25519"),
                "config_file": os.path.join(hosts.ssh, "ssh_config")},
        "hosts": {f"h{i}": {"address": f"{NET}.{i + 1}", "dir": hosts.dir(i)} for i in range(HOSTS)},
        "roles": roles if roles is not None else [
            {"role": "gateway", "host": "h0", "http": f"{GATEWAY_HTTP[0]}:{GATEWAY_HTTP[1]}"},
            {"role": "manager", "host": "h0", "listen": f"{NET}.1:7070",
             "http": f"{MANAGER_HTTP[0]}:{MANAGER_HTTP[1]}", "repository": repo},
        ] + [{"role": "node", "host": f"h{i}", "device": "sim", "device_memory": "512MiB", "cache": "512MiB",
              "rack": f"rack-{i}", "args": ["--threads", "1"]} for i in range(1, HOSTS)],
    }
    for k in drop:
        del inv[k]
    with open(path, "w") as f:
        json.dump(inv, f, indent=1)  # JSON is YAML
    return path


def check_bad_inventories(hosts, repo, config, tokens):
    manager = {"role": "manager", "host": "h0", "repository": repo}
    node = {"role": "node", "host": "h1"}
    bad = {
        "no manager": ([node], "no manager"),
        "unknown role": ([manager, node, {"role": "scheduler", "host": "h2"}], "unknown role 'scheduler'"),
        "duplicate node": ([manager, node, {"role": "node", "host": "h2", "name": "h1"}], "two nodes named 'h1'"),
        "unknown host": ([manager, {"role": "node", "host": "h9"}], "host 'h9' is not in hosts"),
    }
    for what, (roles, message) in bad.items():
        path = write_inventory(os.path.join(hosts.work, "bad.yaml"), hosts, repo, config, tokens, roles=roles)
        check_refused(hosts, path, what, message)
    path = write_inventory(os.path.join(hosts.work, "bad.yaml"), hosts, repo, config,
                           os.path.join(hosts.work, "no-such.tokens"))
    check_refused(hosts, path, "missing credential", "no-such.tokens: file not found")
    path = write_inventory(os.path.join(hosts.work, "bad.yaml"), hosts, repo, config, tokens)
    with open(path) as f:
        inv = json.load(f)
    del inv["hosts"]["h2"]["address"]
    with open(path, "w") as f:
        json.dump(inv, f)
    check_refused(hosts, path, "host without address", "hosts: h2: missing 'address'")
    print("bad inventories refused with a message, no host touched")


def check_refused(hosts, path, what, message):
    rc, out = cluster("up", path, timeout=30)
    if rc == 0 or message not in out:
        raise Failure(f"inventory with {what}: exit {rc}, expected non-zero and '{message}'; said: {out}")
    if os.path.exists(os.path.join(hosts.work, "hosts")):
        raise Failure(f"inventory with {what}: cluster.sh touched a host before refusing it")


def read_pids(hosts):
    pids = {}
    for i in range(HOSTS):
        run = os.path.join(hosts.dir(i), "run", f"h{i}")
        for f in sorted(os.listdir(run)) if os.path.isdir(run) else []:
            if f.endswith(".pid"):
                with open(os.path.join(run, f)) as fh:
                    pids[(i, f[:-4])] = int(fh.read().strip())
    return pids


def check_placement(hosts, pids):
    want = {(0, "manager"), (0, "gateway-h0")} | {(i, f"node-h{i}") for i in range(1, HOSTS)}
    if set(pids) != want:
        raise Failure(f"pid files {sorted(pids)}, expected {sorted(want)}")
    own = os.readlink("/proc/self/ns/net")
    for (i, role), pid in pids.items():
        exe = exe_of(pid)
        if not alive(pid) or exe != os.path.join(hosts.dir(i), "ember"):
            raise Failure(f"{role} (pid {pid}) runs {exe}, expected h{i}'s copy {hosts.dir(i)}/ember")
        ns = sh(["ip", "netns", "identify", str(pid)]).strip()
        if ns != f"ember-h{i}" or os.readlink(f"/proc/{pid}/ns/net") == own:
            raise Failure(f"{role} (pid {pid}) runs in namespace '{ns}', expected ember-h{i}")
    print("each role runs its host's copy of ember in its host's namespace:",
          ", ".join(f"h{i}/{r}={p}" for (i, r), p in sorted(pids.items())))


def check_copies(hosts, ember):
    want = sha256(ember)
    for i in range(HOSTS):
        d = hosts.dir(i)
        if sha256(os.path.join(d, "ember")) != want:
            raise Failure(f"h{i}'s ember differs from {ember}")
        tokens = os.path.join(d, "credentials", "api.tokens")
        mode = stat.S_IMODE(os.stat(tokens).st_mode)
        if mode != 0o600:
            raise Failure(f"{tokens} has mode {mode:o}, expected 600")
        with open(os.path.join(d, "ember.yaml")) as f:
            text = f.read()
        if f"{d}/credentials/api.tokens" not in text:
            raise Failure(f"h{i}'s ember.yaml does not point at its credentials: {text}")
    print(f"ember, ember.yaml ({{dir}} replaced) and credentials/api.tokens (0600) in each of {HOSTS} host directories")


CONSOLE_TLS = ["--tls-certificate", "{dir}/credentials/member.crt", "--tls-key", "{dir}/credentials/member.key",
               "--tls-ca", "{dir}/credentials/ca.crt"]


def make_certificates(ember, work):
    """The cluster CA, one member certificate for every process (the config is the same file on
    every host) with the hosts' addresses, and the data plane's ticket key; the API is served with
    the member certificate too."""
    d = os.path.join(work, "certs")
    sh([ember, "certs", "init", "--dir", d])
    sh([ember, "certs", "issue", "--dir", d, "--name", "member", "--role", "node", "--san",
        ",".join(f"{NET}.{i + 1}" for i in range(HOSTS))])
    with open(os.path.join(d, "tickets.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    TLS["ca"] = os.path.join(d, "ca.crt")


def check_serving(body, expected):
    for where in (MANAGER_HTTP, GATEWAY_HTTP):
        status, text = request(where, "POST", "/v2/models/mlp/infer", body)
        if status != 401:
            raise Failure(f"infer at {where} without a token: HTTP {status}, expected 401: {text[:200]}")
        wait_for(f"mlp served at {where[0]}:{where[1]}",
                 lambda: check_answer(*request(where, "POST", "/v2/models/mlp/infer", body, TOKEN), expected) == "ok",
                 20)
        for _ in range(3):
            if check_answer(*request(where, "POST", "/v2/models/mlp/infer", body, TOKEN), expected) != "ok":
                raise Failure(f"a retryable error from a warm cluster at {where}")


def run(ember):
    work = tempfile.mkdtemp(prefix="ember-cluster-ssh-")
    hosts = Hosts(work)
    inventory = os.path.join(work, "inventory.yaml")
    brought_up = False
    start = time.time()
    try:
        if cluster_namespaces():
            raise Failure("ember-h* namespaces exist already: a cluster is up (deploy/netns-cluster.sh down); "
                          "not touching it")
        shutil.copy(ember, os.path.join(work, "ember"))  # the binary the inventory names
        repo = os.path.join(work, "repo")
        model = os.path.join(repo, "mlp", "1")
        sh([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "1", "--out", model])
        inputs = ember_torch.random_inputs("mlp", True, batch=2, seq_len=4, seed=7)
        fin, fout = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
        ember_torch.write_safetensors(fin, inputs.items())
        sh([ember, "--log-level", "warn", "run", model, "--input", fin, "--output", fout, "--repeat", "0",
            "--device", "sim", "--threads", "1"])
        body = {"inputs": [{"name": n, "datatype": KSERVE[a.dtype], "shape": list(a.shape),
                            "data": a.reshape(-1).tolist()} for n, a in inputs.items()]}
        expected = ember_torch.read_safetensors(fout)

        tokens = os.path.join(work, "api.tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + " admin\n")  # it loads mlp over HTTPS below: the admin scope
        with open(os.path.join(work, "admin.token"), "w") as f:
            f.write("cluster-ssh-test-admin-91c4\n")
        make_certificates(ember, work)
        config = os.path.join(work, "ember.yaml")
        with open(config, "w") as f:
            f.write('gateway:\n  api_tokens_file: "{dir}/credentials/api.tokens"\n'
                    '  tls_certificate: "{dir}/credentials/member.crt"\n  tls_key: "{dir}/credentials/member.key"\n'
                    'manager:\n  admin_token_file: "{dir}/credentials/admin.token"\n  open_reads: false\n'
                    '  node_timeout: 1s\n'
                    'security:\n  tls_certificate: "{dir}/credentials/member.crt"\n'
                    '  tls_key: "{dir}/credentials/member.key"\n  tls_ca: "{dir}/credentials/ca.crt"\n'
                    '  ticket_key_file: "{dir}/credentials/tickets.key"\n  data_plane: tls\n')
        hosts.keys()
        check_bad_inventories(hosts, repo, config, tokens)

        hosts.start()
        write_inventory(inventory, hosts, repo, config, tokens)
        brought_up = True
        out = cluster_ok("up", inventory)
        if out.count("started") < 4 or "copied" not in out:
            raise Failure("the first `up` did not say it copied files and started four roles")
        check_copies(hosts, ember)
        console = ["ip", "netns", "exec", "ember-h0", os.path.join(hosts.dir(0), "ember"), "--log-level", "off",
                   "console", "--manager", f"{NET}.1:7070", "-c", "nodes"]
        tls = [a.replace("{dir}", hosts.dir(0)) for a in CONSOLE_TLS]
        r = subprocess.run(console + tls, capture_output=True, text=True, timeout=15)
        if r.returncode == 0:
            raise Failure(f"the console read the nodes without the admin token: {r.stdout}")
        print(f"`ember console` without the admin token refused: {(r.stdout + r.stderr).strip()[-200:]}")
        r = subprocess.run(console + ["--token-file", os.path.join(hosts.dir(0), "credentials", "admin.token")],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            raise Failure(f"the console without the cluster's certificate read the nodes: {r.stdout}")
        print("`ember console` with the admin token but without the cluster's certificate refused")
        try:
            plain = http.client.HTTPConnection(*MANAGER_HTTP, timeout=5)
            plain.request("GET", "/v2/health/ready")
            raise Failure(f"plain HTTP to the HTTPS API answered: {plain.getresponse().status}")
        except (OSError, http.client.HTTPException):
            print("plain HTTP to the API refused (it is HTTPS)")
        with open(os.path.join(hosts.dir(0), "log", "h0", "manager.log")) as f:
            if "(mutual TLS)" not in f.read():
                raise Failure("the manager does not say its control plane is mutual TLS")
        pids = read_pids(hosts)
        check_placement(hosts, pids)

        status, text = request(MANAGER_HTTP, "POST", "/v2/repository/models/mlp/load")
        if status != 401:
            raise Failure(f"load without a token: HTTP {status}, expected 401: {text[:200]}")
        status, text = request(MANAGER_HTTP, "POST", "/v2/repository/models/mlp/load", token=TOKEN)
        if status != 200:
            raise Failure(f"load mlp: HTTP {status} {text}")
        check_serving(body, expected)
        print("401 without the token; with it, answers through the manager and the gateway match `ember run`")

        out = cluster_ok("up", inventory)
        if "nothing changed" not in out or "files up to date" not in out:
            raise Failure("a second `up` on a running, unchanged cluster did not say nothing changed")
        if read_pids(hosts) != pids:
            raise Failure(f"a second `up` changed pids: {pids} -> {read_pids(hosts)}")
        print("`up` again: nothing changed, same pids")

        victim = pids[(2, "node-h2")]
        os.kill(victim, signal.SIGKILL)
        wait_for(f"node h2 (pid {victim}) gone", lambda: not alive(victim), 10)
        out = cluster_ok("up", inventory)
        if "node h2 on h2" not in out or "1 started" not in out or "nothing changed" in out:
            raise Failure("`up` after a node was killed did not say it started that node")
        after = read_pids(hosts)
        if after[(2, "node-h2")] == victim or {k: v for k, v in after.items() if k != (2, "node-h2")} != \
                {k: v for k, v in pids.items() if k != (2, "node-h2")}:
            raise Failure(f"`up` after killing node h2: pids {pids} -> {after}, expected only h2's to change")
        check_placement(hosts, after)
        check_serving(body, expected)
        print(f"node h2 killed, started again by `up` (pid {victim} -> {after[(2, 'node-h2')]}), still serving")

        out = cluster_ok("status", inventory)
        lines = [line.split() for line in out.splitlines()[1:]]  # after the header
        if len(lines) != 4 or any(line[-2:] != ["running", "ready"] for line in lines):
            raise Failure("`status` does not show four roles running and ready")

        out = cluster_ok("logs", inventory, "h1", "-n", "5")
        if not out.startswith("==> node h1 on h1") or out.count("==> ") != 1 or len(out.splitlines()) < 3:
            raise Failure("`logs h1` did not print node h1's log")
        out = cluster_ok("logs", inventory, "-n", "3")
        if out.count("==> ") != 4:
            raise Failure("`logs` did not print every role's log")

        out = cluster_ok("down", inventory, timeout=60)
        brought_up = False
        final = read_pids(hosts)
        if final:
            raise Failure(f"pid files left after down: {sorted(final)}")
        left = [f"{p} ({exe})" for p, exe in processes_under(work)] + \
               [f"{r}={p}" for r, p in after.items() if alive(p)]
        if left:
            raise Failure(f"processes left after down: {left}")
        out = cluster_ok("down", inventory)
        if "nothing was running" not in out:
            raise Failure("`down` again did not say nothing was running")
        rc, out = cluster("status", inventory)
        print(f"$ cluster.sh status (after down): exit {rc}\n{out}")
        if rc != 3 or "running" in out:
            raise Failure("`status` after down should show every role stopped and exit 3")
        print(f"down left no process and no pid file; {time.time() - start:.1f} s in all")
        print("PASS")
        return 0
    except (Failure, subprocess.TimeoutExpired, OSError, KeyError) as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        hosts.logs()
        return 1
    finally:
        if brought_up:
            subprocess.run(["bash", CLUSTER_SH, "down", inventory], capture_output=True, timeout=60)
        hosts.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    args = ap.parse_args()
    reason = why_skip(args.ember)
    if reason:
        return skip(reason)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that `down` and the teardown still run
    return run(os.path.abspath(args.ember))


if __name__ == "__main__":
    sys.exit(main())
