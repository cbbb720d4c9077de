#!/usr/bin/python3
"""Multicast benchmark (not a timed test): distributes one model blob of at least 1 GiB from one
holder to N = 1..7 receivers on an emulated multi-host network (deploy/netns-cluster.sh: one
`ember node` per network namespace, every host link rate-limited in both directions), by chained
multicast and by parallel unicast from the holder, and prints seconds beside the ideal time
(bytes / link rate), the ratios chain/ideal and unicast/chain, and the CPU the Ember processes used.

Needs root (network namespaces). Every row runs in the same cluster, one after another: receivers'
copies are evicted between rows, so each row moves the whole blob again.

  bench/multicast.py [--ember build/bin/ember] [--rate 1gbit] [--mtu 9000] [--max-n 7]
                     [--transport tcp|ucx] [--arch gpt2-medium] [--modes chain,unicast] [--chunk 1MiB]

The time of a row is the manager's, from the distribute request to the last receiver's verified
digest (every receiver checks every chunk's CRC-32C and the whole blob's SHA-256). CPU is the user +
system time of the manager and every node process over the row, divided by the row's wall time:
cores busy on average, out of os.cpu_count().
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS = os.path.join(ROOT, "deploy", "netns-cluster.sh")
HTTP = ("10.231.0.1", 8000)


def rate_bits(text):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, m in units.items():
        if text.endswith(u):
            return float(text[: -len(u)]) * m
    return float(text)


def post(path, body, timeout=900):
    conn = http.client.HTTPConnection(*HTTP, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = json.loads(r.read().decode() or "{}")
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {data}")
        return data
    finally:
        conn.close()


def cpu_seconds(pids):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except OSError:
            pass
    return total


def netns(*args, env=None, check=True):
    return subprocess.run([NETNS, *args], check=check, capture_output=True, text=True, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--max-n", type=int, default=7)
    ap.add_argument("--transport", default="tcp", choices=["tcp", "ucx"])
    ap.add_argument("--arch", default="gpt2-medium")
    ap.add_argument("--modes", default="chain,unicast")
    ap.add_argument("--chunk", default="1MiB", help="transfer.chunk: payload bytes per frame")
    ap.add_argument("--work", help="folder for the model and logs (default: a temporary one, removed)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("multicast bench: needs root (network namespaces)", file=sys.stderr)
        return 2
    modes = args.modes.split(",")
    work = args.work or tempfile.mkdtemp(prefix="ember-multicast-bench-")
    repo = os.path.join(work, "repo")
    model_dir = os.path.join(repo, "big", "1")
    if not os.path.exists(os.path.join(model_dir, "weights.safetensors")):
        subprocess.run([args.ember, "model", "new", "--arch", args.arch, "--seed", "7", "--name", "big", "--out",
                        model_dir], check=True, capture_output=True)
    blob = os.path.getsize(os.path.join(model_dir, "weights.safetensors"))
    if blob < (1 << 30):
        print(f"multicast bench: the blob has {blob} bytes, less than 1 GiB", file=sys.stderr)
        return 2
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write(f"transfer:\n  transport: {args.transport}\n  chunk: {args.chunk}\n")
    hosts = args.max_n + 1  # h1 holds the model, h2.. receive
    env = dict(os.environ, EMBER=args.ember)
    state = os.path.join(work, "cluster")
    netns("down", "--dir", state, env=env, check=False)
    cache = f"{max(4, (blob >> 30) + 2)}GiB"
    up = netns("up", str(hosts), "--rate", args.rate, "--mtu", str(args.mtu), "--config", config, "--repository",
               repo, "--dir", state, "--", "--cache", cache, "--device-memory", "1GiB", env=env, check=False)
    if up.returncode != 0:
        print(up.stdout + up.stderr, file=sys.stderr)
        return 1
    rows = []
    try:
        pids = [int(line.split()[1]) for line in netns("pids", "--dir", state, env=env).stdout.split("\n") if line]
        ideal = blob * 8 / rate_bits(args.rate)
        seeded = post("/ember/v1/models/big/distribute", {"nodes": ["h1"]})
        print(f"# blob {blob} bytes ({blob / 2**30:.2f} GiB), links {args.rate} each way, MTU {args.mtu}, "
              f"transport {args.transport}, chunk {args.chunk}, {os.cpu_count()} CPUs; holder h1 seeded from the repository in "
              f"{seeded['seconds']:.1f} s; ideal = bytes / link rate = {ideal:.2f} s", flush=True)
        for n in range(1, args.max_n + 1):
            receivers = [f"h{i}" for i in range(2, n + 2)]
            row = {"n": n}
            for mode in modes:
                c0, t0 = cpu_seconds(pids), time.time()
                r = post("/ember/v1/models/big/distribute", {"nodes": receivers, "mode": mode})
                wall = time.time() - t0
                cores = (cpu_seconds(pids) - c0) / wall
                if r["errors"] or len(r["nodes"]) != n:
                    raise RuntimeError(f"{mode} to {n}: {r}")
                row[mode] = (r["seconds"], cores)
                post("/ember/v1/models/big/evict", {"nodes": receivers})
                print(f"  N={n} {mode}: {r['seconds']:.2f} s, {cores:.2f} cores"
                      + (f", chains {r['chains']}" if mode == "chain" else ""), flush=True)
            rows.append(row)
    finally:
        netns("down", "--dir", state, env=env, check=False)

    print()
    head = f"| N | ideal s |"
    sep = "|---|---|"
    if "chain" in modes:
        head += " chain s | chain/ideal | chain CPU (cores) |"
        sep += "---|---|---|"
    if "unicast" in modes:
        head += " unicast s | unicast CPU (cores) |"
        sep += "---|---|"
    if "chain" in modes and "unicast" in modes:
        head += " unicast/chain |"
        sep += "---|"
    print(head)
    print(sep)
    for row in rows:
        line = f"| {row['n']} | {ideal:.2f} |"
        if "chain" in row:
            line += f" {row['chain'][0]:.2f} | {row['chain'][0] / ideal:.3f} | {row['chain'][1]:.2f} |"
        if "unicast" in row:
            line += f" {row['unicast'][0]:.2f} | {row['unicast'][1]:.2f} |"
        if "chain" in row and "unicast" in row:
            line += f" {row['unicast'][0] / row['chain'][0]:.2f} |"
        print(line)
    if not args.work:
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
