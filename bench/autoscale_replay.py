#!/usr/bin/python3
"""Autoscaling replay benchmark (not a timed test): replays a slice of the Azure Functions 2019 trace
(the 100-function sample under ../shared/traces/azure-functions-2019, --traces) against an emulated 4-node
cluster (deploy/netns-cluster.sh: the manager with the HTTP gateway in ember-h0, nodes h1..h4, every
host link 1 Gbit/s, the model repository behind the manager's own link) and compares autoscaling
configurations ("arms") on the same replay. Each arm gets a fresh cluster with its own config file;
at the end one markdown table (one row per arm) is printed and one PNG plot (plus the raw results
as JSON beside it) is written.

Needs root (network namespaces). Runs with /usr/bin/python3 (numpy, matplotlib).

  bench/autoscale_replay.py [--ember build/bin/ember] [--functions 12] [--minutes 40]
                            [--start-minute M] [--seconds-per-minute 3] [--target-rps 12]
                            [--rate-scale S] [--slo-ms 1000] [--seed 1] [--arms today,knative,...]
                            [--work DIR] [--plot autoscale_replay.png] [--workers 128]
                            [--write-trace requests.csv [--trace-only]]

  quick check:  bench/autoscale_replay.py --functions 4 --minutes 6 --arms today,ember-ongoing

Functions. From 100_inv.csv (invocations per minute over the day) the candidates are the functions
with 200..20,000 invocations in the day (busier ones are too hot for a 2-core machine) that are
active (non-zero) in fewer than 60% of the minutes (bursty or sparse rather than steady). They are
sorted by total invocations and F of them are taken evenly spaced over that order (indices
round(linspace(0, n-1, F))), so the pick spans the quiet to the busy end of the range.

Models. Each chosen function gets its own model directory REPO/fNN_<hash8>/1 (own name, own seed):
an MLP input(784) -> fc1 (784xH) -> relu1 -> fc2 (HxH) -> relu2 -> fc3 (Hx10) with random float32
weights (normal x 0.01, seeded). `ember model new --arch mlp` writes the 784-1024-1024-10 manifest;
the script rewrites fc1.out_features, fc2.in/out_features and fc3.in_features to H and writes the
weights with tools/ember_torch.py's write_safetensors; serving.slo_deadline_ms is set to --slo-ms
(the other serving keys are kept). H follows the function's average execution time (100_run.csv)
by tercile among the chosen functions: shortest third H=2048 (~22 MiB), middle H=4096 (~76 MiB),
longest H=5792 (~146 MiB). Models are written once per work directory and reused by every arm.

Time and rate. A window of --minutes trace minutes starting at --start-minute is replayed, each trace
minute compressed to --seconds-per-minute seconds. Default start: among windows in which at least
half of the chosen functions are active and whose peak minute is at most 4x the window's mean
(the burst stays within what 2 cores can serve), the one whose per-minute total over the chosen
functions has the highest peak/median ratio (median floored at 1); 600 if none qualifies. A
function's requests in a compressed minute = round(invocations x rate_scale); by default rate_scale
is solved (bisection) so the whole replay averages --target-rps requests per second. Each minute's
requests are spread uniformly at random (seeded by --seed) within its slot.

Client. Open loop: a scheduler thread hands every request at its time to a pool of --workers threads
that POST /v2/models/NAME/infer (one new HTTP connection per request, 60 s timeout, the same 784-float
input). Latency is measured from the request's scheduled time (so a client that falls behind does
not hide queueing); the largest send lag is printed. A request is lost when its HTTP status is not
200 or it raises; it meets the SLO when answered 200 within --slo-ms.

Metrics. /metrics is sampled every second during the replay. Per-model replicas come from the
manager's ember_autoscale_replicas{model=...}; with autoscaling off that series is absent and the
repository index (POST /v2/repository/index) gives only a state per model, no replica count, so the
per-model count is then the number of nodes that have computed requests for the model
(ember_compute_duration_seconds_count{node,model}): exact there, because replicas are never dropped
with autoscaling off (unless evicted). The total is the sum of the nodes' ember_replicas. Replica-s
= sum over samples of total replicas x the time since the previous sample, over the replay's span.
Cold starts by source tier (cache, local_disk, peer, repository) and their mean durations come from
the manager's ember_replica_cold_starts_total and ember_replica_cold_start_seconds_{sum,count} read
after the replay (0 where a build lacks them).

Arms (each a fresh cluster; `--arms` picks a comma list). Every autoscaling arm has the compressed
time settings interval 250ms, look_back 3s, idle_timeout 6s, downscale_delay 3s, upscale_delay 500ms,
drain_timeout 5s, max_replicas 4:
  today           enabled: false (a model's first request places a replica, none is ever dropped)
  knative         ongoing_requests, target 1, host_keep_alive 0, peer_sources false, placement random,
                  chain_scale_up false
  ember-ongoing   ongoing_requests, target 1, host_keep_alive 10min                       (c1)
  ember-rate      arrival_rate, headroom 1.25                                              (c2)
  ember-queue     queue_latency, target_queue_latency 100ms                                (c3)
  ember-rpm       requests_per_minute, target_requests_per_minute 300                      (c4)
  ember-no-cache  as ember-ongoing with host_keep_alive 0                                  (d)
  ember-no-chain  as ember-ongoing with chain_scale_up false                               (e)
The ember-* arms do not write chain_scale_up / peer_sources / placement unless the arm changes
them: they run with the build's defaults. An arm whose config the build rejects (e.g. "unknown
key" from a build without those keys) is reported and skipped, as is any arm whose cluster fails;
the tail of its cluster logs is printed. The cluster is always torn down (also on Ctrl-C). The
--ember binary is copied into the work directory first, so every arm runs the same build even if
build/ is relinked meanwhile. Latencies depend on what else the 2 cores run: the 1-minute load
average after each arm is printed and kept in the JSON.
"""
import argparse
import csv
import glob
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS = os.path.join(ROOT, "deploy", "netns-cluster.sh")
TRACES = os.path.join(os.path.dirname(ROOT), "shared", "traces", "azure-functions-2019")
HTTP = ("10.231.0.1", 8000)
NODES = 4
SIZES = (2048, 4096, 5792)
TIERS = ("cache", "local_disk", "peer", "repository")

COMMON = {"enabled": "true", "interval": "250ms", "look_back": "3s", "idle_timeout": "6s",
          "downscale_delay": "3s", "upscale_delay": "500ms", "drain_timeout": "5s", "max_replicas": "4"}
ONGOING = {"policy": "ongoing_requests", "target_ongoing_requests": "1", "host_keep_alive": "10min"}
ARMS = {  # name -> autoscale: keys (None: autoscaling off)
    "today": {"enabled": "false"},
    "knative": {**COMMON, "policy": "ongoing_requests", "target_ongoing_requests": "1", "host_keep_alive": "0s",
                "peer_sources": "false", "placement": "random", "chain_scale_up": "false"},
    "ember-ongoing": {**COMMON, **ONGOING},
    "ember-rate": {**COMMON, "policy": "arrival_rate", "headroom": "1.25", "host_keep_alive": "10min"},
    "ember-queue": {**COMMON, "policy": "queue_latency", "target_queue_latency": "100ms", "host_keep_alive": "10min"},
    "ember-rpm": {**COMMON, "policy": "requests_per_minute", "target_requests_per_minute": "300",
                  "host_keep_alive": "10min"},
    "ember-no-cache": {**COMMON, **ONGOING, "host_keep_alive": "0s"},
    "ember-no-chain": {**COMMON, **ONGOING, "chain_scale_up": "false"},
}


# ---------------------------------------------------------------------------------------------
# Trace: functions, window, schedule.

def read_trace(folder):
    inv, run_ms = {}, {}
    with open(os.path.join(folder, "100_inv.csv")) as f:
        r = csv.reader(f)
        next(r)
        for row in r:
            inv[row[0]] = np.array([int(x) for x in row[3:]], dtype=np.int64)
    with open(os.path.join(folder, "100_run.csv")) as f:
        r = csv.DictReader(f)
        for row in r:
            run_ms[row["HashFunction"]] = float(row["Average"])
    return inv, run_ms


def choose_functions(inv, run_ms, n):
    cand = [h for h, a in inv.items()
            if 200 <= a.sum() <= 20000 and (a > 0).sum() < 0.6 * len(a) and h in run_ms]
    cand.sort(key=lambda h: (inv[h].sum(), h))
    if n > len(cand):
        sys.exit(f"--functions {n}: only {len(cand)} functions qualify")
    idx = sorted(set(int(i) for i in np.round(np.linspace(0, len(cand) - 1, n))))
    chosen = [cand[i] for i in idx]
    # Size by execution-time tercile among the chosen ones.
    by_time = sorted(chosen, key=lambda h: (run_ms[h], h))
    size = {h: SIZES[min(2, (3 * rank) // len(by_time))] for rank, h in enumerate(by_time)}
    return chosen, size


def choose_window(A, minutes):
    """Start minute: highest peak/median of the per-minute total, at least half the functions active,
    peak at most 4x the window's mean; 600 if no window qualifies."""
    tot = A.sum(axis=0)
    best = None
    for s in range(0, A.shape[1] - minutes + 1):
        w = tot[s:s + minutes]
        active = int((A[:, s:s + minutes].sum(axis=1) > 0).sum())
        if active < (A.shape[0] + 1) // 2 or w.sum() == 0 or w.max() > 4 * w.mean():
            continue
        key = (w.max() / max(float(np.median(w)), 1.0), int(w.sum()))
        if best is None or key > best[0]:
            best = (key, s)
    return best[1] if best else 600


def round_half_up(x):
    return np.floor(x + 0.5).astype(np.int64)


def solve_scale(W, target):
    """rate_scale such that sum(round(W * scale)) is about target."""
    if W.sum() == 0:
        sys.exit("the window has no invocations of the chosen functions; pick another --start-minute")
    lo, hi = 0.0, 1.0
    while round_half_up(W * hi).sum() < target and hi < 1e6:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if round_half_up(W * mid).sum() < target:
            lo = mid
        else:
            hi = mid
    return hi


def build_schedule(W, names, scale, spm, seed):
    rng = random.Random(seed)
    events = []
    counts = round_half_up(W * scale)
    for i, name in enumerate(names):
        for m in range(W.shape[1]):
            for _ in range(int(counts[i, m])):
                events.append((m * spm + rng.uniform(0, spm), name))
    events.sort()
    return events


# ---------------------------------------------------------------------------------------------
# Models.

def write_models(ember, repo, names, sizes, seeds, slo_ms):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from ember_torch import write_safetensors
    for name in names:
        H, seed = sizes[name], seeds[name]
        d = os.path.join(repo, name, "1")
        stamp = os.path.join(repo, name, ".made")
        want = f"H={H} seed={seed} slo={slo_ms}"
        if os.path.exists(stamp) and open(stamp).read() == want:
            continue
        shutil.rmtree(os.path.join(repo, name), ignore_errors=True)
        subprocess.run([ember, "model", "new", "--arch", "mlp", "--seed", str(seed), "--name", name, "--out", d],
                       check=True, capture_output=True, text=True)
        path = os.path.join(d, "model.json")
        with open(path) as f:
            m = json.load(f)
        layers = {l["name"]: l for l in m["layers"]}
        layers["fc1"]["attrs"]["out_features"] = H
        layers["fc2"]["attrs"]["in_features"] = H
        layers["fc2"]["attrs"]["out_features"] = H
        layers["fc3"]["attrs"]["in_features"] = H
        m["description"] = f"Multi-layer perceptron 784-{H}-{H}-10"
        m.setdefault("serving", {})["slo_deadline_ms"] = float(slo_ms)
        shapes = {"fc1.weight": (H, 784), "fc1.bias": (H,), "fc2.weight": (H, H), "fc2.bias": (H,),
                  "fc3.weight": (10, H), "fc3.bias": (10,)}
        rng = np.random.default_rng(seed)
        tensors = []
        for layer in m["layers"]:
            for _, tensor in layer.get("weights", {}).items():
                tensors.append((tensor, rng.standard_normal(shapes[tensor], dtype=np.float32) * np.float32(0.01)))
        write_safetensors(os.path.join(d, "weights.safetensors"), tensors)
        with open(path, "w") as f:
            json.dump(m, f, indent=1)
        with open(stamp, "w") as f:
            f.write(want)


# ---------------------------------------------------------------------------------------------
# Cluster and HTTP.

def netns(*args, ember, check=True):
    env = dict(os.environ, EMBER=ember)
    return subprocess.run([NETNS, *args], check=check, capture_output=True, text=True, env=env, cwd=ROOT)


def http_req(method, path, body=None, timeout=5):
    conn = http.client.HTTPConnection(*HTTP, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), v))
    return out


def get_metrics():
    status, body = http_req("GET", "/metrics", timeout=5)
    if status != 200:
        raise RuntimeError(f"/metrics: HTTP {status}")
    return parse_metrics(body.decode(errors="replace"))


def wait_ready(timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if http_req("GET", "/v2/health/ready", timeout=2)[0] == 200:
                joined = sum(1 for n, l, _ in get_metrics() if n == "ember_replicas" and l.get("node", "").startswith("h"))
                if joined >= NODES:
                    return
        except (OSError, http.client.HTTPException, RuntimeError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"cluster not ready with {NODES} nodes after {timeout} s")


def replica_counts(metrics, models):
    """(total replicas over the nodes, {model: replicas}, source of the per-model counts)."""
    total = sum(v for n, l, v in metrics if n == "ember_replicas" and l.get("node", "").startswith("h"))
    per = {}
    for n, l, v in metrics:
        if n == "ember_autoscale_replicas" and l.get("model") in models:
            per[l["model"]] = per.get(l["model"], 0) + v
    if per:
        return total, {m: per.get(m, 0.0) for m in models}, "autoscale"
    served = {m: set() for m in models}
    for n, l, v in metrics:
        if n == "ember_compute_duration_seconds_count" and l.get("model") in models and v > 0:
            served[l["model"]].add(l.get("node"))
    return total, {m: float(len(s)) for m, s in served.items()}, "nodes-served"


def cold_starts(metrics):
    count = {t: 0.0 for t in TIERS}
    secs = {t: 0.0 for t in TIERS}
    for n, l, v in metrics:
        t = l.get("tier")
        if t not in count:
            continue
        if n == "ember_replica_cold_starts_total":
            count[t] += v
        elif n == "ember_replica_cold_start_seconds_sum":
            secs[t] += v
    return count, secs


def tail_logs(state, lines=15):
    for path in sorted(glob.glob(os.path.join(state, "*.log"))):
        try:
            with open(path, errors="replace") as f:
                text = f.readlines()[-lines:]
        except OSError:
            continue
        print(f"    --- {path} (last {len(text)} lines)")
        for line in text:
            print("    " + line.rstrip())


# ---------------------------------------------------------------------------------------------
# One arm.

def write_config(path, keys):
    with open(path, "w") as f:
        f.write("autoscale:\n")
        for k, v in keys.items():
            f.write(f"  {k}: {v}\n")


def replay(events, models, duration, slo_ms, workers):
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 784],
                                   "data": [round(0.001 * (i % 97), 3) for i in range(784)]}]}).encode()
    results = [None] * len(events)
    samples = []
    stop = threading.Event()
    t0 = time.monotonic() + 0.5

    def send(i, t, model):
        sent = time.monotonic() - t0
        try:
            status, data = http_req("POST", f"/v2/models/{model}/infer", body=body, timeout=60)
            err = None if status == 200 else data[:300].decode(errors="replace")
        except Exception as e:  # noqa: BLE001 - any failure is a lost request
            status, err = 0, f"{type(e).__name__}: {e}"
        done = time.monotonic() - t0
        results[i] = {"model": model, "t": t, "sent": sent, "latency_ms": (done - t) * 1000, "status": status,
                      "error": err}

    def sampler():
        prev = 0.0
        while not stop.is_set():
            now = time.monotonic() - t0
            try:
                total, per, src = replica_counts(get_metrics(), models)
                samples.append({"t": now, "dt": max(0.0, now - prev), "total": total, "per_model": per, "source": src})
                prev = now
            except Exception as e:  # noqa: BLE001
                samples.append({"t": now, "error": str(e)})
            stop.wait(max(0.0, 1.0 - ((time.monotonic() - t0) - now)))

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    pool = ThreadPoolExecutor(max_workers=workers)
    max_lag = 0.0
    for i, (t, model) in enumerate(events):
        delay = t0 + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        max_lag = max(max_lag, time.monotonic() - t0 - t)
        pool.submit(send, i, t, model)
    while time.monotonic() - t0 < duration:
        time.sleep(0.1)
    pool.shutdown(wait=True)
    stop.set()
    th.join()
    return results, samples, max_lag


def summarize(results, samples, duration, counts, secs, slo_ms):
    ok = [r for r in results if r["status"] == 200]
    lat = np.array([r["latency_ms"] for r in ok]) if ok else np.array([np.nan])
    good = sum(1 for r in ok if r["latency_ms"] <= slo_ms)
    rs = sum(s["total"] * s["dt"] for s in samples if "total" in s and s["t"] <= duration)
    return {"requests": len(results), "lost": len(results) - len(ok), "mean_ms": float(np.nanmean(lat)),
            "p99_ms": float(np.nanpercentile(lat, 99)), "slo_pct": 100.0 * good / max(1, len(results)),
            "cold_starts": counts, "cold_start_mean_ms": {t: (1000 * secs[t] / counts[t] if counts[t] else 0.0)
                                                         for t in TIERS},
            "cold_start_overall_ms": (1000 * sum(secs.values()) / sum(counts.values())
                                      if sum(counts.values()) else None),
            "replica_seconds": rs}


def run_arm(arm, args, work, repo, events, models, duration):
    print(f"\n== arm {arm}", flush=True)
    state = os.path.join(work, f"state-{arm}")
    conf = os.path.join(work, f"{arm}.yaml")
    write_config(conf, ARMS[arm])
    shutil.rmtree(state, ignore_errors=True)
    netns("down", "--dir", state, ember=args.ember, check=False)
    try:
        t = time.time()
        up = netns("up", str(NODES), "--rate", "1gbit", "--config", conf, "--repository", repo, "--dir", state,
                   "--", "--device-memory", "1GiB", "--cache", "2GiB", "--threads", "1", ember=args.ember, check=False)
        if up.returncode != 0:
            print(f"  cluster failed to start (rc {up.returncode}): {up.stderr.strip()[-800:]}")
            logs = " ".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(state, "*.log")))
            m = re.search(r".*unknown key.*", logs)
            if m:
                print(f"  ember rejected a key of this arm's config: {m.group(0).strip()}")
            tail_logs(state)
            return {"arm": arm, "error": "cluster failed to start", "stderr": up.stderr[-2000:]}
        wait_ready()
        print(f"  cluster up in {time.time() - t:.1f} s; replaying {len(events)} requests over {duration:.0f} s",
              flush=True)
        results, samples, max_lag = replay(events, models, duration, args.slo_ms, args.workers)
        final = get_metrics()
        counts, secs = cold_starts(final)
        s = summarize(results, samples, duration, counts, secs, args.slo_ms)
        errors = [r for r in results if r["status"] != 200]
        for r in errors[:5]:
            print(f"  lost: {r['model']} at {r['t']:.2f} s: HTTP {r['status']}: {r['error']}")
        sources = sorted({x.get("source") for x in samples if "source" in x})
        s["loadavg_1min"] = os.getloadavg()[0]
        print(f"  {s['requests']} requests, {s['lost']} lost, mean {s['mean_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, "
              f"SLO {s['slo_pct']:.1f}%, replica-s {s['replica_seconds']:.0f}, largest send lag {max_lag * 1000:.0f} ms, "
              f"per-model replicas from {'/'.join(sources)}, load average {s['loadavg_1min']:.1f}", flush=True)
        if s["lost"] > 0.5 * max(1, s["requests"]):
            print("  more than half the requests were lost; cluster logs:")
            tail_logs(state)
        gw_cold = {l.get("model"): v for n, l, v in final if n == "ember_cold_starts_total" and l.get("model")}
        return {"arm": arm, "config": ARMS[arm], "summary": s, "max_send_lag_s": max_lag, "samples": samples,
                "requests": results, "gateway_cold_starts": gw_cold}
    except Exception as e:  # noqa: BLE001 - report, show logs, go on with the next arm
        print(f"  arm {arm} failed: {type(e).__name__}: {e}")
        tail_logs(state)
        return {"arm": arm, "error": f"{type(e).__name__}: {e}"}
    finally:
        netns("down", "--dir", state, ember=args.ember, check=False)


# ---------------------------------------------------------------------------------------------
# Report.

def fmt_tiers(d, fmt):
    s = "/".join(fmt(d[t]) for t in ("cache", "peer", "repository"))
    if d.get("local_disk"):
        s += f" (+{fmt(d['local_disk'])} disk)"
    return s


def print_table(rows):
    print("\n| arm | requests | lost | mean ms | p99 ms | SLO % | cold starts (cache/peer/repo) "
          "| mean cold start ms (cache/peer/repo) | replica-s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "summary" not in r:
            print(f"| {r['arm']} | failed: {r.get('error', '?')} | | | | | | | |")
            continue
        s = r["summary"]
        print(f"| {r['arm']} | {s['requests']} | {s['lost']} | {s['mean_ms']:.0f} | {s['p99_ms']:.0f} | "
              f"{s['slo_pct']:.1f} | {fmt_tiers(s['cold_starts'], lambda v: f'{v:.0f}')} | "
              f"{fmt_tiers(s['cold_start_mean_ms'], lambda v: f'{v:.0f}')} | {s['replica_seconds']:.0f} |")
    by = {r["arm"]: r for r in rows if "summary" in r}
    if "ember-ongoing" in by and "knative" in by:
        x = by["ember-ongoing"]["summary"]["cold_start_overall_ms"]
        y = by["knative"]["summary"]["cold_start_overall_ms"]
        if x is not None and y:
            print(f"\nmean cold start: c1 {x:.0f} ms vs knative {y:.0f} ms ({100 * (y - x) / y:.0f}% shorter)")
        else:
            print("\nmean cold start: c1 vs knative: no cold starts counted (build without the cold-start metrics?)")


def plot(path, rows, model, events, duration, slo_ms):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by = {r["arm"]: r for r in rows if "summary" in r}
    arms = [a for a in ("ember-ongoing", "knative", "today") if a in by] or list(by)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    colors = {}
    for arm in arms:
        smp = [s for s in by[arm]["samples"] if "per_model" in s]
        line, = ax1.step([s["t"] for s in smp], [s["per_model"].get(model, 0) for s in smp], where="post",
                         label=arm, lw=1.6)
        colors[arm] = line.get_color()
    arr = [t for t, m in events if m == model]
    ax1b = ax1.twinx()
    ax1b.hist(arr, bins=np.arange(0, duration + 1, 1.0), color="0.8", zorder=0, label="requests/s")
    ax1b.set_ylabel("requests per s (grey)")
    ax1.set_zorder(ax1b.get_zorder() + 1)
    ax1.patch.set_visible(False)
    ax1.set_ylabel("replicas")
    ax1.legend(loc="upper left")
    ax1.set_title(f"{model}: replicas and request latency by arm")
    for arm in arms:
        req = [r for r in by[arm]["requests"] if r["model"] == model]
        ok = [r for r in req if r["status"] == 200]
        lost = [r for r in req if r["status"] != 200]
        ax2.scatter([r["t"] for r in ok], [r["latency_ms"] for r in ok], s=6, alpha=0.6, color=colors[arm], label=arm)
        if lost:
            ax2.scatter([r["t"] for r in lost], [60000] * len(lost), s=14, marker="x", color=colors[arm])
    ax2.axhline(slo_ms, color="k", ls="--", lw=0.8, label=f"SLO {slo_ms:.0f} ms")
    ax2.set_yscale("log")
    ax2.set_ylabel("latency ms (x: lost)")
    ax2.set_xlabel("replay time s")
    ax2.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--traces", default=TRACES, help="the Azure Functions 2019 sample folder")
    ap.add_argument("--functions", type=int, default=12)
    ap.add_argument("--minutes", type=int, default=40)
    ap.add_argument("--start-minute", type=int, default=None, help="0-based trace minute (default: chosen as described above)")
    ap.add_argument("--seconds-per-minute", type=float, default=3.0)
    ap.add_argument("--target-rps", type=float, default=12.0)
    ap.add_argument("--rate-scale", type=float, default=None, help="default: solved from --target-rps")
    ap.add_argument("--slo-ms", type=float, default=1000.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--work", default=None, help="work directory to keep (default: a temporary one)")
    ap.add_argument("--plot", default="autoscale_replay.png")
    ap.add_argument("--workers", type=int, default=128, help="client threads")
    ap.add_argument("--profile", action="store_true",
                    help="measure each model's profile.json before the replay (the manager then plans with it: "
                         "its execution time stands in until the autoscaler measured one)")
    ap.add_argument("--write-trace", default=None, metavar="CSV",
                    help="also write the replay's requests as time_s,model (what `ember sim` replays: the "
                         "simulator and the cluster see the same requests)")
    ap.add_argument("--trace-only", action="store_true",
                    help="write --write-trace and stop (no cluster, no root needed)")
    args = ap.parse_args()

    if args.trace_only and not args.write_trace:
        sys.exit("--trace-only needs --write-trace CSV")
    if os.geteuid() != 0 and not args.trace_only:
        sys.exit("needs root (network namespaces): run with sudo")
    args.ember = os.path.abspath(args.ember)
    if not args.trace_only and not os.access(args.ember, os.X_OK):
        sys.exit(f"{args.ember} is not built")
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        if a not in ARMS:
            sys.exit(f"unknown arm {a!r}; arms: {', '.join(ARMS)}")

    if not args.trace_only and subprocess.run(["ip", "netns", "list"], capture_output=True,
                                               text=True).stdout.count("ember-h"):
        sys.exit("an emulated cluster (ember-h* namespaces) is already up: not touching it; "
                 "take it down with deploy/netns-cluster.sh down first")

    inv, run_ms = read_trace(args.traces)
    chosen, size = choose_functions(inv, run_ms, args.functions)
    A = np.array([inv[h] for h in chosen])
    if args.minutes < 1 or args.minutes > A.shape[1]:
        sys.exit(f"--minutes must be 1..{A.shape[1]}")
    start = args.start_minute if args.start_minute is not None else choose_window(A, args.minutes)
    start = max(0, min(start, A.shape[1] - args.minutes))
    W = A[:, start:start + args.minutes]
    spm = args.seconds_per_minute
    duration = args.minutes * spm
    scale = args.rate_scale or solve_scale(W, args.target_rps * duration)
    names = [f"f{i:02d}_{h[:8]}" for i, h in enumerate(chosen)]
    sizes = {n: size[h] for n, h in zip(names, chosen)}
    seeds = {n: args.seed * 1000 + i for i, n in enumerate(names)}
    events = build_schedule(W, names, scale, spm, args.seed)
    per = {n: sum(1 for _, m in events if m == n) for n in names}
    busiest = max(names, key=lambda n: (per[n], n))

    print(f"trace minutes {start}..{start + args.minutes - 1} ({W.sum()} invocations), {spm:g} s per minute: "
          f"{duration:.0f} s of replay, rate scale {scale:.3f}, {len(events)} requests "
          f"({len(events) / duration:.1f}/s)")
    print("| function | model | H | avg exec ms | invocations in window | requests in replay |")
    print("|---|---|---:|---:|---:|---:|")
    for n, h, row in zip(names, chosen, W):
        print(f"| {h[:8]} | {n} | {sizes[n]} | {run_ms[h]:.0f} | {row.sum()} | {per[n]} |")
    print(f"busiest: {busiest}")
    if args.write_trace:
        with open(args.write_trace, "w") as f:
            f.write("time_s,model\n")
            for t, m in events:
                f.write(f"{t:.6f},{m}\n")
        print(f"requests written to {args.write_trace}")
        if args.trace_only:
            return

    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="autoscale_replay.")
    os.makedirs(work, exist_ok=True)
    # Every arm runs the same binary even if build/ is rebuilt meanwhile: a copy in the work dir.
    snap = os.path.join(work, "bin")
    os.makedirs(snap, exist_ok=True)
    for f in glob.glob(os.path.join(os.path.dirname(args.ember), "libember_*.so")) + [args.ember]:
        shutil.copy2(f, os.path.join(snap, os.path.basename(f)))
    print(f"ember: {args.ember} (copied to {snap}, built {time.ctime(os.path.getmtime(args.ember))})")
    args.ember = os.path.join(snap, os.path.basename(args.ember))
    repo = os.path.join(work, "repo")
    os.makedirs(repo, exist_ok=True)
    t = time.time()
    write_models(args.ember, repo, names, sizes, seeds, args.slo_ms)
    if args.profile:
        for name in names:  # one compute thread, as the nodes run (--threads 1)
            d = os.path.join(repo, name, "1")
            if not os.path.exists(os.path.join(d, "profile.json")):
                subprocess.run([args.ember, "model", "profile", d, "--threads", "1", "--log-level", "warn"], check=True,
                               capture_output=True, text=True)
    print(f"models in {repo} ({time.time() - t:.1f} s); work directory {work}", flush=True)

    rows = []
    try:
        for arm in arms:
            rows.append(run_arm(arm, args, work, repo, events, names, duration))
    except KeyboardInterrupt:
        print("\ninterrupted")  # run_arm's finally has taken the cluster down

    print_table(rows)
    plot_path = os.path.abspath(args.plot)
    os.makedirs(os.path.dirname(plot_path), exist_ok=True)
    out = {"args": vars(args), "trace_start_minute": start, "rate_scale": scale, "duration_s": duration,
           "functions": [{"hash": h, "model": n, "H": sizes[n], "avg_exec_ms": run_ms[h],
                          "invocations": W[i].tolist(), "requests": per[n]} for i, (n, h) in enumerate(zip(names, chosen))],
           "busiest": busiest, "arms": rows}
    json_path = os.path.splitext(plot_path)[0] + ".json"
    with open(json_path, "w") as f:
        json.dump(out, f)
    if any("summary" in r for r in rows):
        try:
            plot(plot_path, rows, busiest, events, duration, args.slo_ms)
            print(f"\nplot: {plot_path}")
        except ImportError as e:
            print(f"\nno plot ({e}: apt-get install python3-matplotlib)")
    print(f"results: {json_path}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
