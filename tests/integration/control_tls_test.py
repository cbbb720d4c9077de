#!/usr/bin/python3
"""Mutual TLS on the control plane (security.tls_certificate, tls_key, tls_key_passphrase_file,
tls_ca) and tickets on the data plane (security.ticket_key_file): a manager with the HTTP gateway,
two nodes, a standalone gateway and consoles, every one with a certificate from `ember certs`, on
loopback.

- Acceptance: the nodes join, a model loads and is served through the manager's gateway and through
  a standalone gateway (which dials the manager and each node over TLS); a console with the cluster's
  certificate and the admin token reads and changes the cluster.
- Refusals: a node with a certificate from another CA, a node without TLS, a console without TLS, a
  console with TLS and a wrong token (it may read, not change), a TLS client with no certificate and
  plain TCP clients sending garbage to the manager's and a node's control ports. None of them joins
  or is answered, and none of them disturbs the members: the nodes stay joined (the manager logs no
  node lost) and requests sent all along are all served. (CAF 0.17.6 alone failed this last part:
  security/ssl_io_shim.cpp.)
- Data plane: the nodes fetch the model's bytes from the manager's repository server with the
  manager's tickets; a raw fetch with no ticket, a forged one or one for another blob is refused by
  the manager's and a node's blob servers with an abort naming the reason, and no byte of the blob.
- Start-up errors name the file: a certificate that does not exist, an encrypted key without its
  passphrase and with a wrong one, a key of another certificate, a certificate another CA signed,
  and a config with a certificate but no CA.

Usage: control_tls_test.py --ember PATH
"""
import argparse
import hashlib
import hmac
import http.client
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

from ports import free_port
from procs import Failure, print_tail, stop, wait_for

BODY = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]})
ADMIN_TOKEN = "control-plane-admin-token-1"


def http_call(port, method, path, body=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


class Cluster:
    def __init__(self, ember, work):
        self.ember, self.work = ember, work
        self.procs = {}

    def config(self, name, security, extra=""):
        path = os.path.join(self.work, f"{name}.yaml")
        with open(path, "w") as f:
            if security:
                f.write("security:\n" + "".join(f"  {k}: {v}\n" for k, v in security.items()))
            f.write(extra)
        return path

    def start(self, name, args):
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen([self.ember, *args], stdout=log, stderr=subprocess.STDOUT)
        return self.procs[name]

    def log(self, name):
        with open(os.path.join(self.work, f"{name}.log")) as f:
            return f.read()

    def stop(self, name):
        stop(self.procs.pop(name, None), timeout=15)

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)


def certs(ember, work):
    """The cluster CA with certificates for each member (and an encrypted copy of one key), and
    another CA with a node certificate of its own."""
    d, other = os.path.join(work, "certs"), os.path.join(work, "other-ca")

    def run(*args):
        subprocess.run([ember, "certs", *args], check=True, capture_output=True)

    run("init", "--dir", d)
    for name, role in (("manager", "manager"), ("n1", "node"), ("n2", "node"), ("gw", "gateway"),
                       ("console", "console")):
        run("issue", "--dir", d, "--name", name, "--role", role, "--san", "127.0.0.1,localhost")
    run("init", "--dir", other, "--name", "another CA")
    run("issue", "--dir", other, "--name", "intruder", "--role", "node", "--san", "127.0.0.1")
    with open(os.path.join(d, "pass.txt"), "w") as f:
        f.write("correct horse battery staple\n")
    with open(os.path.join(d, "tickets.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    with open(os.path.join(d, "short.key"), "w") as f:
        f.write("0123456789abcdef\n")
    with open(os.path.join(d, "wrong-pass.txt"), "w") as f:
        f.write("tr0ub4dor\n")
    subprocess.run(["openssl", "pkey", "-in", "n2.key", "-aes256", "-passout", "file:pass.txt", "-out", "n2-enc.key"],
                   cwd=d, check=True, capture_output=True)
    return d, other


def member(d, name, key=None, passphrase=None, ca=None, tickets=False):
    s = {"tls_certificate": os.path.join(d, f"{name}.crt"), "tls_key": key or os.path.join(d, f"{name}.key"),
         "tls_ca": ca or os.path.join(d, "ca.crt")}
    if passphrase:
        s["tls_key_passphrase_file"] = passphrase
    if tickets:
        s["ticket_key_file"] = os.path.join(d, "tickets.key")
    return s


def fetch_request(key, receiver=b"", not_after=0, mac=b""):
    """A data-plane fetch request (transport/fetch_request.hpp): Ember's 4-byte length, then one
    single-segment Cap'n Proto message of struct FetchRequest (transport/frame.capnp), by hand:
    data words transferId, offset, length, ticketNotAfter; pointers key, ticketReceiver, ticketMac."""
    def blob(data, text):
        body = data + (b"\0" if text else b"")
        return body + b"\0" * (-len(body) % 8), len(body)

    parts = [blob(key.encode(), True), blob(receiver, True), blob(mac, False)]
    words = [struct.pack("<Q", 0 | (4 << 32) | (3 << 48))]  # root: a struct right after, 4 data words, 3 pointers
    words += [struct.pack("<QQQQ", 7, 0, 0, not_after)]
    after = 0  # words between the end of each pointer and its content
    for i, (padded, count) in enumerate(parts):
        offset = (2 - i) + after  # the pointers left after this one, then the earlier contents
        kind = 2  # byte elements
        words.append(struct.pack("<Q", 1 | (offset << 2) | (kind << 32) | (count << 35)))
        after += len(padded) // 8
    words += [p for p, _ in parts]
    segment = b"".join(words)
    message = struct.pack("<II", 0, len(segment) // 8) + segment
    return struct.pack("<I", len(message)) + message


def raw_fetch(port, request):
    """Everything the server sends back before it closes (at most 64 KiB)."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        while len(out) < 65536:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    return out


def bad_starts(ember, work, d, other):
    c = Cluster(ember, work)
    port = free_port()
    cases = (
        ("a certificate that does not exist", member(d, "nope"), "security.tls_certificate (" + d + "/nope.crt)"),
        ("an encrypted key without its passphrase", member(d, "n2", key=os.path.join(d, "n2-enc.key")),
         "set tls_key_passphrase_file"),
        ("a wrong passphrase", member(d, "n2", key=os.path.join(d, "n2-enc.key"),
                                      passphrase=os.path.join(d, "wrong-pass.txt")), "with the passphrase of"),
        ("a key of another certificate", member(d, "n1", key=os.path.join(d, "n2.key")), "is not the key of"),
        ("a certificate another CA signed", member(other, "intruder", ca=os.path.join(d, "ca.crt")),
         "does not verify against security.tls_ca"),
        ("a ticket key file that does not exist", dict(member(d, "n1"), ticket_key_file=os.path.join(d, "nope.key")),
         "security.ticket_key_file (" + d + "/nope.key)"),
        ("a ticket key too short", dict(member(d, "n1"), ticket_key_file=os.path.join(d, "short.key")),
         "at least 32 characters"),
    )
    for what, security, expected in cases:
        path = c.config("bad", security)
        r = subprocess.run([ember, "node", "--manager", f"127.0.0.1:{port}", "--name", "bad", "--config", path,
                            "--device-memory", "64MiB", "--cache", "64MiB"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode == 0 or expected not in r.stderr:
            raise Failure(f"a node with {what}: exit {r.returncode}, stderr {r.stderr.strip()[-400:]!r}; "
                          f"expected an error saying {expected!r}")
    no_ca = {"tls_certificate": os.path.join(d, "n1.crt"), "tls_key": os.path.join(d, "n1.key")}
    r = subprocess.run([ember, "node", "--manager", f"127.0.0.1:{port}", "--config", c.config("bad", no_ca)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "go together" not in r.stderr:
        raise Failure(f"a config with a certificate and no CA: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
    r = subprocess.run([ember, "console", "--manager", f"127.0.0.1:{port}", "--tls-certificate",
                        os.path.join(d, "console.crt"), "--tls-key", os.path.join(d, "n1.key"), "--tls-ca",
                        os.path.join(d, "ca.crt"), "-c", "nodes"], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "--tls.tls_key" not in r.stderr:
        raise Failure(f"a console with a key of another certificate: exit {r.returncode}, {r.stderr.strip()[-300:]!r}")
    print(f"ok: {len(cases) + 2} bad start-ups refused, each error naming the file or the keys")


def console(ember, manager_port, tls, token, command):
    args = [ember, "console", "--manager", f"127.0.0.1:{manager_port}", "-c", command]
    if tls:
        args += ["--tls-certificate", tls["tls_certificate"], "--tls-key", tls["tls_key"], "--tls-ca", tls["tls_ca"]]
    env = dict(os.environ)
    env.pop("EMBER_ADMIN_TOKEN_FILE", None)
    if token:
        args += ["--token-file", token]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


def nodes_joined(http_port):
    status, text = http_call(http_port, "GET", "/metrics")
    return {line.split('node="')[1].split('"')[0] for line in text.splitlines()
            if line.startswith("ember_replicas{node=")} if status == 200 else set()


class Load:
    """Requests one after another through a gateway while the intruders try their luck: all must be
    served."""

    def __init__(self, port):
        self.port, self.sent, self.failed, self.stop = port, 0, [], threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop.is_set() and self.sent < 20000:  # bounded
            try:
                status, text = http_call(self.port, "POST", "/v2/models/mlp/infer", BODY)
            except OSError as e:
                status, text = 0, str(e)
            self.sent += 1
            if status != 200:
                self.failed.append(f"HTTP {status}: {text[:200]}")
            time.sleep(0.005)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.sent, self.failed


def garbage(port, connections=20):
    """Plain TCP clients: some send junk, some close at once, some send a TLS ClientHello's first
    bytes and stop."""
    for i in range(connections):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if i % 3 == 0:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
                elif i % 3 == 1:
                    s.sendall(b"\x16\x03\x01\x00\xff\x01\x00\x00")
                try:
                    s.recv(64)
                except OSError:
                    pass
        except OSError:
            pass


def tls_without_certificate(port):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(b"hello")
                if s.recv(64):
                    return "answered"
    except (OSError, ssl.SSLError):
        return "refused"
    return "refused"


def data_port(log, pattern):
    for line in log.splitlines():
        if pattern in line:
            return int(line.split(pattern)[1].split()[0].split(":")[1].rstrip(",)"))
    raise Failure(f"no '{pattern}' in the log:\n{log[-600:]}")


def ticket(key_file, blob, receiver, not_after):
    """The mac transport/ticket.hpp computes, from the cluster's key file."""
    with open(key_file) as f:
        secret = f.read().strip().encode()
    data = b"\0".join([b"ember-ticket/1", blob.encode(), receiver.encode(), str(not_after).encode()])
    return hmac.new(secret, data, hashlib.sha256).digest()


def check_tickets(c, key_file):
    """Raw fetches of mlp/1 (7 KiB) from the manager's repository server and from the nodes' (one of
    which holds it): without a ticket, with a forged one, one for another blob or an expired one, each
    answered by a short abort naming the reason and no byte of the blob; with a valid one, the blob
    from the manager and from the node that holds it."""
    ports = {"the manager": data_port(c.log("manager"), "repository served on "),
             "node n1": data_port(c.log("n1"), "data plane "), "node n2": data_port(c.log("n2"), "data plane ")}
    later, earlier = int(time.time()) + 300, int(time.time()) - 600
    cases = (("no ticket", fetch_request("mlp/1"), b"without a ticket"),
             ("a forged ticket", fetch_request("mlp/1", b"n1", later, b"\x01" * 32), b"not valid here"),
             ("a ticket for another blob",
              fetch_request("mlp/1", b"n1", later, ticket(key_file, "bert/1", "n1", later)), b"not valid here"),
             ("an expired ticket",
              fetch_request("mlp/1", b"n1", earlier, ticket(key_file, "mlp/1", "n1", earlier)), b"expired"))
    for where, port in ports.items():
        for what, request, says in cases:
            answer = raw_fetch(port, request)
            if says not in answer or len(answer) > 1024:
                raise Failure(f"{where}: a fetch with {what} got {len(answer)} bytes: {answer[:300]!r}")
    served = {}
    for where, port in ports.items():
        valid = raw_fetch(port, fetch_request("mlp/1", b"n1", later, ticket(key_file, "mlp/1", "n1", later)))
        if len(valid) >= 7000:
            served[where] = len(valid)
        elif b"does not hold" not in valid:
            raise Failure(f"{where}: a fetch with a valid ticket got {len(valid)} bytes: {valid[:300]!r}")
    if "the manager" not in served or len(served) != 2:
        raise Failure(f"a valid ticket was served by {sorted(served)}: expected the manager and the node holding mlp/1")
    print("ok: fetches without a ticket, with a forged one, one for another blob or an expired one refused by the "
          "blob servers of the manager and both nodes, no byte of the blob sent; a valid ticket is served by the "
          f"manager and the node holding mlp/1 ({served})")


def check_rotation(ember, c, d, manager_port, http_port, gw_port, token):
    """`ember certs rotate`, then the rollout's mixed states on the live cluster: the manager trusting
    both CAs (the bundle) with its old certificate, n2 on a new certificate from the new CA, n1 still
    on the old certificate trusting the old CA only. All members, and requests answered throughout
    through the standalone gateway."""
    r = subprocess.run([ember, "certs", "rotate", "--dir", d], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or "ca-bundle.crt" not in r.stdout:
        raise Failure(f"ember certs rotate: exit {r.returncode}: {r.stdout} {r.stderr}")
    nxt = os.path.join(d, "next")
    bundle = os.path.join(nxt, "ca-bundle.crt")
    load = Load(gw_port)
    c.stop("manager")  # step 1 for the manager: tls_ca the bundle, its certificate the old one
    c.start("manager", ["manager", "--listen", f"127.0.0.1:{manager_port}", "--http", f"127.0.0.1:{http_port}",
                        "--repository", os.path.join(c.work, "repo"), "--config",
                        c.config("manager", member(d, "manager", ca=bundle, tickets=True),
                                 f"manager:\n  admin_token_file: {token}\n")])
    wait_for("n1 and n2 to rejoin the restarted manager", lambda: nodes_joined(http_port) == {"n1", "n2"}, 30)
    c.stop("n2")  # step 2 for n2: the new certificate and key, trusting both
    security = {"tls_certificate": os.path.join(nxt, "n2.crt"), "tls_key": os.path.join(nxt, "n2.key"),
                "tls_ca": bundle, "ticket_key_file": os.path.join(d, "tickets.key")}
    c.start("n2", ["node", "--name", "n2", "--manager", f"127.0.0.1:{manager_port}", "--device-memory", "256MiB",
                   "--cache", "256MiB", "--threads", "1", "--config", c.config("n2", security)])
    time.sleep(1.5)  # n2 is dropped on its stop and joins again
    wait_for("n2 on its new certificate to join", lambda: nodes_joined(http_port) == {"n1", "n2"}, 30)
    sent, failed = load.finish()
    if failed:
        raise Failure(f"{len(failed)} of {sent} requests failed during the rotation: {failed[:3]}")
    print(f"ok: ember certs rotate re-issued the members from a new CA; the manager on the bundle, n2 on its new "
          f"certificate and n1 on the old one, all members; {sent} requests through the standalone gateway during "
          f"the restarts, all served")


def run(ember, work):
    d, other = certs(ember, work)
    bad_starts(ember, work, d, other)
    repo = os.path.join(work, "repo")
    subprocess.run([ember, "model", "new", "--arch", "mlp", "--tiny", "--seed", "5", "--out",
                    os.path.join(repo, "mlp", "1")], check=True, capture_output=True)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write(ADMIN_TOKEN + "\n")
    wrong = os.path.join(work, "wrong.token")
    with open(wrong, "w") as f:
        f.write("not-the-admin-token\n")
    c = Cluster(ember, work)
    manager_port, http_port, gw_port = free_port(), free_port(), free_port()
    node_port = free_port()
    manager_yaml = c.config("manager", member(d, "manager", tickets=True),
                            f"manager:\n  admin_token_file: {token}\n")
    try:
        c.start("manager", ["manager", "--listen", f"127.0.0.1:{manager_port}", "--http", f"127.0.0.1:{http_port}",
                            "--repository", repo, "--config", manager_yaml])
        wait_for("the manager", lambda: http_call(http_port, "GET", "/v2/health/live")[0] == 200, 30)
        if "(mutual TLS)" not in c.log("manager"):
            raise Failure("the manager does not say it listens with mutual TLS:\n" + c.log("manager"))
        node_args = ["--manager", f"127.0.0.1:{manager_port}", "--device-memory", "256MiB", "--cache", "256MiB",
                     "--threads", "1"]
        c.start("n1", ["node", "--name", "n1", "--listen", f"127.0.0.1:{node_port}", *node_args,
                       "--config", c.config("n1", member(d, "n1", tickets=True))])
        c.start("n2", ["node", "--name", "n2", *node_args, "--config",
                       c.config("n2", member(d, "n2", key=os.path.join(d, "n2-enc.key"),
                                             passphrase=os.path.join(d, "pass.txt"), tickets=True))])
        wait_for("n1 and n2 to join", lambda: nodes_joined(http_port) == {"n1", "n2"}, 30)
        status, text = http_call(http_port, "POST", "/v2/repository/models/mlp/load", "{}", timeout=60)
        if status != 200:
            raise Failure(f"load mlp: HTTP {status} {text}")
        status, text = http_call(http_port, "POST", "/v2/models/mlp/infer", BODY, timeout=30)
        if status != 200 or json.loads(text)["outputs"][0]["shape"] != [1, 4]:
            raise Failure(f"infer through the manager's gateway: HTTP {status} {text[:300]}")
        c.start("gw", ["gateway", "--manager", f"127.0.0.1:{manager_port}", "--http", f"127.0.0.1:{gw_port}",
                       "--config", c.config("gw", member(d, "gw"))])
        wait_for("the standalone gateway to serve mlp",
                 lambda: http_call(gw_port, "POST", "/v2/models/mlp/infer", BODY)[0] == 200, 30)
        print("ok: nodes n1 and n2 (its key encrypted) joined over mutual TLS; mlp served through the manager's "
              "gateway and a standalone gateway, its bytes fetched with the manager's ticket")
        check_tickets(c, os.path.join(d, "tickets.key"))

        ok = console(ember, manager_port, member(d, "console"), token, "nodes")
        if ok.returncode != 0 or "n1" not in ok.stdout or "n2" not in ok.stdout:
            raise Failure(f"console with the cluster's certificate: exit {ok.returncode} {ok.stdout} {ok.stderr}")
        changed = console(ember, manager_port, member(d, "console"), token, "load mlp")
        if changed.returncode != 0:
            raise Failure(f"console `load mlp` with the token: exit {changed.returncode} {changed.stderr}")
        print("ok: a console with the cluster's certificate and the admin token reads and changes the cluster")

        load = Load(gw_port)
        direct = Load(http_port)
        # Intruders, while requests flow: none joins or is answered; none disturbs the members.
        c.start("intruder", ["node", "--name", "intruder", *node_args, "--config",
                             c.config("intruder", member(other, "intruder", ca=os.path.join(other, "ca.crt")))])
        c.start("plain", ["node", "--name", "plain", *node_args])
        started = time.time()
        r = console(ember, manager_port, None, token, "nodes")
        if r.returncode == 0:
            raise Failure(f"a console without TLS was answered: {r.stdout}")
        r = console(ember, manager_port, member(d, "console"), wrong, "unload mlp")
        if r.returncode == 0 or "token" not in r.stderr:
            raise Failure(f"a console with a wrong token changed the cluster: exit {r.returncode} {r.stderr}")
        for port in (manager_port, node_port):
            garbage(port)
            if tls_without_certificate(port) != "refused":
                raise Failure(f"a TLS client without a certificate was answered on port {port}")
        time.sleep(max(0.0, 4 - (time.time() - started)))  # the intruding nodes retry every second
        joined = nodes_joined(http_port)
        if joined != {"n1", "n2"}:
            raise Failure(f"members after the intruders: {sorted(joined)}")
        for name in ("intruder", "plain"):
            if f"node {name}: joined" in c.log(name):
                raise Failure(f"node {name} joined:\n{c.log(name)[-800:]}")
            if "unreachable" not in c.log(name):
                raise Failure(f"node {name} says nothing of its refusals:\n{c.log(name)[-800:]}")
        lost = [line for line in c.log("manager").splitlines()
                if "manager: node" in line and ("lost" in line or "left" in line or "dropped" in line)]
        if lost:
            raise Failure("the intruders disturbed the members:\n" + "\n".join(lost))
        for name, l in (("the standalone gateway", load), ("the manager's gateway", direct)):
            sent, failed = l.finish()
            if failed or sent < 10:
                raise Failure(f"{name}: {len(failed)} of {sent} requests failed during the intrusions: {failed[:3]}")
            print(f"ok: {sent} requests through {name} during the intrusions, all served")
        print("ok: refused: a node of another CA, a node and a console without TLS, a console with a wrong "
              "token (changes), a TLS client without a certificate, 40 plain TCP clients; the members stayed")
        check_rotation(ember, c, d, manager_port, http_port, gw_port, token)
        c.stop_all()
        print("PASS")
        return 0
    except (Failure, subprocess.TimeoutExpired, OSError) as e:
        print(f"FAIL: {e}")
        for name in ("manager", "n1", "n2", "gw", "intruder", "plain"):
            print_tail(os.path.join(work, f"{name}.log"))
        return 1
    finally:
        c.stop_all()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ember-control-tls-")
    try:
        return run(os.path.abspath(args.ember), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
