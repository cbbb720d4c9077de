#!/usr/bin/python3
"""The systemd units in deploy/systemd/: `systemd-analyze verify` finds nothing to say about any of
them (their ExecStart pointed at the built binary), each has what a serving host needs (Type=notify,
Restart=on-failure, an environment file, a config file, LimitNOFILE; the node LimitMEMLOCK=infinity
for pinned model memory), every option an ExecStart passes is one its subcommand takes; and Ember's
processes speak the notify protocol: `ember serve` and `ember manager` send READY=1 once they serve
and STOPPING=1 when asked to stop, to a socket of this test's standing in for systemd.

Usage: systemd_units_test.py --ember PATH   (exit 77: no systemd-analyze here)
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
UNITS = os.path.join(HERE, "..", "..", "deploy", "systemd")
NEEDED = {
    "ember-manager.service": ["Type=notify", "Restart=on-failure", "LimitNOFILE=", "EnvironmentFile=-/etc/default/ember"],
    "ember-gateway.service": ["Type=notify", "Restart=on-failure", "LimitNOFILE=", "EnvironmentFile=-/etc/default/ember"],
    "ember-node@.service": ["Type=notify", "Restart=on-failure", "LimitNOFILE=", "LimitMEMLOCK=infinity",
                            "EnvironmentFile=-/etc/default/ember"],
}


class Failure(Exception):
    pass


def check_units(ember, work):
    found = sorted(f for f in os.listdir(UNITS) if f.endswith(".service"))
    if found != sorted(NEEDED):
        raise Failure(f"deploy/systemd holds {found}, expected {sorted(NEEDED)}")
    for name, needed in NEEDED.items():
        with open(os.path.join(UNITS, name)) as f:
            text = f.read()
        for line in needed:
            if line not in text:
                raise Failure(f"{name} lacks {line}")
        exec_start = re.search(r"^ExecStart=(\S+) (\S+) (.*)$", text, re.M)
        if not exec_start or exec_start.group(1) != "/usr/local/bin/ember":
            raise Failure(f"{name}: ExecStart is not /usr/local/bin/ember SUBCOMMAND ...")
        sub, args = exec_start.group(2), exec_start.group(3)
        if "--config /etc/ember/ember.yaml" not in args:
            raise Failure(f"{name}: ExecStart passes no --config /etc/ember/ember.yaml")
        helptext = subprocess.run([ember, sub, "--help"], capture_output=True, text=True).stdout
        for option in re.findall(r"(--[a-z-]+)", args):
            if option not in helptext:
                raise Failure(f"{name}: `ember {sub}` has no option {option}")
        # verify: with the binary where the build put it; a template as an instance of it.
        target = name.replace("@.", "@gpu-a.")
        with open(os.path.join(work, target), "w") as f:
            f.write(text.replace("/usr/local/bin/ember", os.path.abspath(ember)))
        r = subprocess.run(["systemd-analyze", "verify", os.path.join(work, target)], capture_output=True, text=True)
        said = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or said:
            raise Failure(f"systemd-analyze verify {name}: rc {r.returncode}: {said}")
        print(f"ok: {name}: verified, {', '.join(needed)}; `ember {sub}` takes {', '.join(re.findall(r'(--[a-z-]+)', args))}")


def check_notify(ember, work):
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    for role, args in (("serve", ["--repository", repo, "--http", f"127.0.0.1:{free_port()}", "--device-memory",
                                  "256MiB", "--cache", "256MiB"]),
                       ("manager", ["--repository", repo, "--listen", f"127.0.0.1:{free_port()}"])):
        path = os.path.join(work, f"notify-{role}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(30)
        env = dict(os.environ, NOTIFY_SOCKET=path)
        proc = subprocess.Popen([ember, "--log-level", "warn", role] + args, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = time.time()
            ready = sock.recv(4096).decode()
            if "READY=1" not in ready.splitlines():
                raise Failure(f"ember {role}: first notification {ready!r}, expected READY=1")
            print(f"ok: ember {role} told the service manager {ready!r} after {time.time() - started:.1f} s")
            proc.send_signal(signal.SIGTERM)
            stopping = sock.recv(4096).decode()
            if "STOPPING=1" not in stopping.splitlines():
                raise Failure(f"ember {role}: on SIGTERM it said {stopping!r}, expected STOPPING=1")
            if proc.wait(timeout=30) != 0:
                raise Failure(f"ember {role} exited {proc.returncode} on SIGTERM")
        except socket.timeout:
            raise Failure(f"ember {role}: no notification within 30 s")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sock.close()
    print("ok: READY=1 once serving, STOPPING=1 on SIGTERM")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    if not shutil.which("systemd-analyze"):
        print("SKIP: no systemd-analyze on this machine")
        return 77
    work = tempfile.mkdtemp(prefix="ember-units-")
    try:
        check_units(args.ember, work)
        check_notify(args.ember, work)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
