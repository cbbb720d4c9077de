#!/usr/bin/python3
"""Flashpoint's full-scale experiment on `ember sim` (issue 36; docs/benchmarks/flashpoint-sim.md):
1,600 GPUs (deploy/sim/flashpoint.yaml), Flashpoint's six model sizes (deploy/sim/flashpoint-models.yaml),
a Twitter-like and an Azure Functions trace (bench/flashpoint_traces.py), one model at a time as
Flashpoint ran them, under four autoscaling policies, each with its techniques off (the baseline)
and on, at equal resource use. No root; one core.

  bench/flashpoint_sim.py [--ember build/bin/ember] [--work flashpoint_sim] [--traces twitter,azure]
                          [--models codebert,...] [--policies tsk,atl,owk,sm] [--arms baseline,lc,mc,lc+mc]
                          [--sweep] [--scale] [--partition] [--failure] [--tolerance 0.05] [--seed 1]
                          [--plot FILE.png]

Arms (autoscale: keys over deploy/sim/flashpoint.yaml's; every arm the same policy):
  baseline  every cold start from cloud storage onto a random node: peer_sources false,
            placement random, chain_scale_up false, host_keep_alive 0s (no bytes kept)
  lc        locality (Flashpoint's LC): host caches kept (host_keep_alive 1h), peers' memory as a
            source, locality placement; no chains
  mc        multicast (MC): chains from the cloud (chain_scale_up true), nothing else
  lc+mc     both (Ember's defaults)
Partitioned cold starts (MP) are in --partition: Ember partitions only a scale-up of a model no node
holds, which a running service never is.

Policies, Flashpoint's four mapped onto Ember's (config/choices.hpp):
  tsk  TorchServe on Kubernetes: queue_latency, target_queue_latency 7s (its default)
  atl  Atoll: arrival_rate, headroom 1.25
  owk  OpenWhisk on Kubernetes (HPA on GPU utilization 60%): ongoing_requests, target 0.6
  sm   SageMaker (invocations per instance): requests_per_minute, target 70% of one replica's
       capacity (0.7 x 60,000 / the model's exec ms)

Equal resources, as Flashpoint: each arm but the baseline is re-run with the policy's target
scaled (a bisection over a factor, log scale, at most --tune-steps runs, default 7) until its replica-seconds
are within --tolerance of the baseline's; the table says the factor and the replica-seconds. An
arm that cannot get there says so.

--sweep: the cloud-bandwidth sweep (Flashpoint's Fig. 8.3): the largest model under atl, baseline,
mc and lc+mc, cloud link 1, 2.2, 5, 10 and 20 Gbit/s, Twitter-like trace.
--scale: the simulator's speed at 16, 1,600 and 16,000 GPUs (2, 200, 2,000 hosts), the largest
model under atl with lc+mc, Twitter-like trace: the simulation's wall seconds (as ember sim prints
them: the run, not reading the files or writing the outputs) and events per second.

--partition: partitioned cold starts (Flashpoint's MP) on and off. Each model cold when the hour
begins (no replica, no bytes cached: sim.warm_replicas 0) and loaded with four replicas at time 0
(sim.load_replicas 4, as `load --replicas 4`), Twitter-like trace, atl; arms baseline and lc+mc, each
with autoscale.partition_stages 1 (off) and 4 (on, "+mp"; partition_bandwidth: the slower of the
cloud link and a host link); on Flashpoint's shared cloud link (2,203 Mbit/s) and on a storage
service inside the data centre (400 Gbit/s, faster than a host's 50 Gbit/s link, as the live
partition benchmark's repository against its nodes). Not tuned to equal replica-seconds (printed).

--failure: host failures under load: the largest model, Twitter-like, atl, baseline and lc+mc; in
each arm the host that served the most requests in the minute before 20 minutes dies then, and the
busiest other one in the minute before 40 minutes dies then (sim.failures, from the same arm's run
without failures); every request running or queued there is sent again.

Writes WORK/results.json and prints markdown tables.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "deploy", "sim", "flashpoint.yaml")
MODELS = os.path.join(ROOT, "deploy", "sim", "flashpoint-models.yaml")
TRACES = os.path.join(ROOT, "bench", "flashpoint_traces.py")

ARMS = {
    "baseline": {"peer_sources": "false", "placement": "random", "chain_scale_up": "false", "host_keep_alive": "0s"},
    "lc": {"peer_sources": "true", "placement": "locality", "chain_scale_up": "false", "host_keep_alive": "1h"},
    "mc": {"peer_sources": "false", "placement": "random", "chain_scale_up": "true", "host_keep_alive": "0s"},
    "lc+mc": {"peer_sources": "true", "placement": "locality", "chain_scale_up": "true", "host_keep_alive": "1h"},
}
# policy -> (Ember policy, the target key, its value for a model of exec_ms)
POLICIES = {
    "tsk": ("queue_latency", "target_queue_latency", lambda ms: 7000.0, "ms"),
    "atl": ("arrival_rate", "headroom", lambda ms: 1.25, ""),
    "owk": ("ongoing_requests", "target_ongoing_requests", lambda ms: 0.6, ""),
    "sm": ("requests_per_minute", "target_requests_per_minute", lambda ms: 0.7 * 60000.0 / ms, ""),
}
# Which way a larger target moves the replicas: +1 more replicas, -1 fewer.
MORE_WITH_LARGER = {"headroom": +1, "target_queue_latency": -1, "target_ongoing_requests": -1,
                    "target_requests_per_minute": -1}
LIMITS = {"headroom": (1.0, 10.0), "target_queue_latency": (1.0, 3_600_000.0),
          "target_ongoing_requests": (0.01, 10000.0), "target_requests_per_minute": (0.01, 1e9)}


SIZES = {"codebert": "499 MB", "albert": "890 MB", "bart": "1,626 MB", "dialogpt": "3,135 MB",
         "gpt2-xl": "6,282 MB", "t5": "11,408 MB"}
# ../shared/seeds/digest-flashpoint.md §4.9: mean end-to-end improvement against the baseline.
FLASHPOINT_TABLE_8_1 = {
    "azure": {"codebert": "17.25%", "albert": "20.79%", "bart": "37.44%", "dialogpt": "49.11%", "gpt2-xl": "66.57%",
              "t5": "78.64%"},
    "twitter": {"codebert": "16.52%", "albert": "27.02%", "bart": "37.66%", "dialogpt": "60.05%", "gpt2-xl": "74.12%",
                "t5": "92.79%"},
}


def read_models():
    """The model names of deploy/sim/flashpoint-models.yaml, in its order."""
    with open(MODELS) as f:
        return [m["name"] for m in yaml.safe_load(f)["models"]]


def exec_ms(ember, work, model):
    """One request's time on the modelled GPU (the profile's, scaled): a two-request simulation's
    second, warm request."""
    trace = os.path.join(work, f"one-{model}.csv")
    with open(trace, "w") as f:
        f.write(f"time_s,model\n0,{model}\n100,{model}\n")
    sim(ember, work, trace, {"enabled": "false"}, f"one-{model}", {})
    with open(os.path.join(work, "runs", f"one-{model}", "requests.csv")) as f:
        return float(list(csv.DictReader(f))[-1]["latency_ms"])


def sim(ember, work, trace, autoscale, label, extra_sets):
    out = os.path.join(work, "runs", label)
    cmd = [ember, "sim", "--cluster", CLUSTER, "--models", MODELS, "--trace", trace, "--out", out, "--label", label]
    for k, v in autoscale.items():
        cmd += ["--set", f"autoscale.{k}={v}"]
    for k, v in extra_sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    # The simulation's own time, as ember sim prints it ("N events in S s of wall time").
    for line in r.stdout.splitlines():
        if " events in " in line:
            s["wall_s"] = float(line.split(" events in ")[1].split(" s ")[0])
    return s


def fmt_target(key, v):
    return f"{v:.0f}ms" if key == "target_queue_latency" else f"{v:.4g}"


def run_arm(args, work, trace, model, policy, arm, ms, baseline_rs=None):
    ember_policy, key, target_of, _ = POLICIES[policy]
    base_target = target_of(ms)
    keys = dict(ARMS[arm], policy=ember_policy)

    def at(factor):
        target = min(max(base_target * factor, LIMITS[key][0]), LIMITS[key][1])
        label = f"{os.path.basename(trace)[:-4]}-{model}-{policy}-{arm}-{factor:.4g}"
        s = sim(args.ember, work, trace, dict(keys, **{key: fmt_target(key, target)}), label, {})
        s["factor"], s["target"] = factor, target
        return s

    s = at(1.0)
    if baseline_rs is None or abs(s["replica_seconds"] / baseline_rs - 1) <= args.tolerance:
        return s
    # Bisection over log(factor): find the factor whose replica-seconds match the baseline's.
    direction = MORE_WITH_LARGER[key]
    lo, hi = -6.0, 6.0  # log2 of the factor
    best = s
    for _ in range(args.tune_steps):
        mid = (lo + hi) / 2
        t = at(2 ** mid)
        if abs(t["replica_seconds"] / baseline_rs - 1) < abs(best["replica_seconds"] / baseline_rs - 1):
            best = t
        if abs(t["replica_seconds"] / baseline_rs - 1) <= args.tolerance:
            return t
        too_many = t["replica_seconds"] > baseline_rs
        # More replicas than the baseline: move the target the way that gives fewer.
        if too_many == (direction > 0):
            hi = mid
        else:
            lo = mid
    best["untuned"] = True
    return best


def pct(new, old):
    return f"{100 * (new - old) / old:+.1f}%" if old else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--work", default="flashpoint_sim")
    ap.add_argument("--traces", default="twitter,azure")
    ap.add_argument("--models", default="")
    ap.add_argument("--policies", default="tsk,atl,owk,sm")
    ap.add_argument("--arms", default="baseline,lc,mc,lc+mc")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--tune-steps", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--partition", action="store_true")
    ap.add_argument("--failure", action="store_true")
    ap.add_argument("--plot", default="", help="write a PNG of the tables (matplotlib)")
    args = ap.parse_args()
    args.ember = os.path.abspath(args.ember)
    work = os.path.abspath(args.work)
    os.makedirs(os.path.join(work, "runs"), exist_ok=True)
    models = [m for m in args.models.split(",") if m] or read_models()
    arms = [a for a in args.arms.split(",") if a]
    if arms[0] != "baseline":
        sys.exit("--arms must start with baseline (the others are tuned to its replica-seconds)")
    results = {"args": vars(args), "runs": []}

    def trace_for(kind, model):
        path = os.path.join(work, f"{kind}-{model}.csv")
        if not os.path.exists(path):
            r = subprocess.run([sys.executable, TRACES, kind, path, "--model", model, "--seed", str(args.seed),
                                "--minutes", str(args.minutes)], check=True, capture_output=True, text=True)
            print(r.stdout.strip())
        return path

    exec_of = {m: exec_ms(args.ember, work, m) for m in models}
    print("| model | exec ms on the modelled GPU |\n|---|---:|")
    for m in models:
        print(f"| {m} | {exec_of[m]:.1f} |")

    for kind in [k for k in args.traces.split(",") if k]:
        print(f"\n### {kind}\n")
        print("| model | policy | arm | target (factor) | replica-s (vs baseline) | mean cold start s | "
              "cold starts (cache/peer/repo) | mean e2e ms | p99 e2e ms | lost |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for model in models:
            trace = trace_for(kind, model)
            for policy in [p for p in args.policies.split(",") if p]:
                base = None
                for arm in arms:
                    s = run_arm(args, work, trace, model, policy, arm, exec_of[model],
                                None if arm == "baseline" else base["replica_seconds"])
                    if arm == "baseline":
                        base = s
                    s.update(trace=kind, model=model, policy=policy, arm=arm)
                    results["runs"].append(s)
                    c = s["cold_starts"]
                    key = POLICIES[policy][1]
                    print(f"| {model} | {policy} | {arm}{' (not within tolerance)' if s.get('untuned') else ''} | "
                          f"{fmt_target(key, s['target'])} ({s['factor']:.3g}) | {s['replica_seconds']:.0f} "
                          f"({pct(s['replica_seconds'], base['replica_seconds'])}) | {s['cold_start_mean_ms'] / 1000:.2f} | "
                          f"{c['cache']['count']}/{c['peer']['count']}/{c['repository']['count']} | {s['mean_ms']:.0f} | "
                          f"{s['p99_ms']:.0f} | {s['lost']} |", flush=True)
        # The headline: mean over models and policies of each arm's change against its baseline.
        print(f"\n{kind}: each arm against the baseline, mean over models and policies of the per-run change:\n")
        print("| arm | mean cold start | mean e2e | p99 e2e | replica-s |\n|---|---:|---:|---:|---:|")
        runs = [r for r in results["runs"] if r["trace"] == kind]
        for arm in arms[1:]:
            ch = {"cold": [], "mean": [], "p99": [], "rs": []}
            for r in runs:
                if r["arm"] != arm:
                    continue
                b = next(x for x in runs if x["arm"] == "baseline" and x["model"] == r["model"] and x["policy"] == r["policy"])
                if b["cold_start_mean_ms"]:
                    ch["cold"].append(r["cold_start_mean_ms"] / b["cold_start_mean_ms"] - 1)
                ch["mean"].append(r["mean_ms"] / b["mean_ms"] - 1)
                ch["p99"].append(r["p99_ms"] / b["p99_ms"] - 1)
                ch["rs"].append(r["replica_seconds"] / b["replica_seconds"] - 1)
            f = lambda xs: f"{100 * statistics.mean(xs):+.1f}%" if xs else "n/a"
            print(f"| {arm} | {f(ch['cold'])} | {f(ch['mean'])} | {f(ch['p99'])} | {f(ch['rs'])} |")
        # Per model, as Flashpoint's Table 8.1 (its mean end-to-end improvement against its baseline,
        # the mean of the per-autoscaler ratios).
        last = arms[-1]
        paper = FLASHPOINT_TABLE_8_1[kind]
        print(f"\n{kind}: {last} against the baseline per model, mean over policies "
              f"(Flashpoint's Table 8.1: its mean end-to-end improvement against its baseline)\n")
        print("| model | size | mean cold start | mean e2e | p99 e2e | Flashpoint mean e2e |\n|---|---:|---:|---:|---:|---:|")
        for m in models:
            ch = {"cold": [], "mean": [], "p99": []}
            for r in runs:
                if r["arm"] != last or r["model"] != m:
                    continue
                b = next(x for x in runs if x["arm"] == "baseline" and x["model"] == m and x["policy"] == r["policy"])
                if b["cold_start_mean_ms"]:
                    ch["cold"].append(r["cold_start_mean_ms"] / b["cold_start_mean_ms"] - 1)
                ch["mean"].append(r["mean_ms"] / b["mean_ms"] - 1)
                ch["p99"].append(r["p99_ms"] / b["p99_ms"] - 1)
            f = lambda xs: f"{100 * statistics.mean(xs):+.1f}%" if xs else "no cold start"
            print(f"| {m} | {SIZES.get(m, '?')} | {f(ch['cold'])} | {f(ch['mean'])} | {f(ch['p99'])} | "
                  f"{'-' + paper[m] if m in paper else 'n/a'} |")

    if args.sweep:
        big = models[-1]
        trace = trace_for("twitter", big)
        print(f"\ncloud bandwidth sweep: {big}, atl, Twitter-like\n")
        print("| cloud link | arm | mean cold start s | mean e2e ms | p99 e2e ms | replica-s |\n|---|---|---:|---:|---:|---:|")
        for gbit in ("1Gbit/s", "2.2Gbit/s", "5Gbit/s", "10Gbit/s", "20Gbit/s"):
            for arm in ("baseline", "mc", "lc+mc"):
                keys = dict(ARMS[arm], policy="arrival_rate", headroom="1.25")
                s = sim(args.ember, work, trace, keys, f"sweep-{gbit.replace('/', '')}-{arm}",
                        {"topology.cloud_link": gbit})
                s.update(sweep=gbit, arm=arm)
                results.setdefault("sweep", []).append(s)
                print(f"| {gbit} | {arm} | {s['cold_start_mean_ms'] / 1000:.2f} | {s['mean_ms']:.0f} | {s['p99_ms']:.0f} | "
                      f"{s['replica_seconds']:.0f} |", flush=True)

    if args.scale:
        big = models[-1]
        trace = trace_for("twitter", big)
        print(f"\nscale: {big}, atl, lc+mc, Twitter-like\n")
        print("| GPUs | events | wall s | events/s | mean e2e ms |\n|---:|---:|---:|---:|---:|")
        for hosts in (2, 200, 2000):
            keys = dict(ARMS["lc+mc"], policy="arrival_rate", headroom="1.25")
            s = sim(args.ember, work, trace, keys, f"scale-{hosts}", {"topology.hosts": str(hosts)})
            s.update(hosts=hosts)
            results.setdefault("scale", []).append(s)
            print(f"| {hosts * 8} | {s['events']} | {s['wall_s']:.2f} | {s['events'] / s['wall_s'] / 1e6:.2f} M | "
                  f"{s['mean_ms']:.0f} |", flush=True)

    if args.partition:
        partition(args, work, models, trace_for, results)
    if args.failure:
        failure(args, work, models, trace_for, results)

    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nresults: {os.path.join(work, 'results.json')}")
    if args.plot:
        plot(args.plot, results, models, arms)
        print(f"plot: {args.plot}")


def partition(args, work, models, trace_for, results):
    """--partition: each model cold at time 0, loaded with four replicas, MP off and on."""
    print("\npartitioned cold starts: each model cold at 0 s and loaded with 4 replicas, atl, Twitter-like\n")
    print("| storage link | model | arm | first answer s | stage loads (mean s) | requests through a pipeline | "
          "mean e2e ms | p99 e2e ms | replica-s |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
    for link, bandwidth in (("2203Mbit/s", "2203Mbit/s"), ("400Gbit/s", "50Gbit/s")):
        for model in models:
            trace = trace_for("twitter", model)
            for arm in ("baseline", "lc+mc"):
                for mp in (False, True):
                    keys = dict(ARMS[arm], policy="arrival_rate", headroom="1.25",
                                partition_stages="4" if mp else "1", partition_bandwidth=bandwidth)
                    label = f"mp-{link.replace('/', '')}-{model}-{arm}{'+mp' if mp else ''}"
                    s = sim(args.ember, work, trace, keys, label,
                            {"topology.cloud_link": link, "sim.warm_replicas": "0", "sim.load_replicas": "4"})
                    with open(os.path.join(work, "runs", label, "requests.csv")) as f:
                        ends = [float(r["end_s"]) for r in csv.DictReader(f) if r["lost"] == "0"]
                    s.update(link=link, model=model, arm=arm + ("+mp" if mp else ""), first_answer_s=min(ends))
                    results.setdefault("partition", []).append(s)
                    st = s["cold_starts"].get("stage", {"count": 0, "mean_ms": 0})
                    stages = f"{st['count']} ({st['mean_ms'] / 1000:.2f})" if st["count"] else "-"
                    print(f"| {link} | {model} | {s['arm']} | {s['first_answer_s']:.2f} | {stages} | "
                          f"{s['pipeline_requests']} | {s['mean_ms']:.0f} | {s['p99_ms']:.0f} | {s['replica_seconds']:.0f} |",
                          flush=True)


def failure(args, work, models, trace_for, results):
    """--failure: two hosts die under load; what the requests and the replacements see."""
    big = models[-1]
    trace = trace_for("twitter", big)
    print(f"\nhost failures: {big}, atl, Twitter-like; the busiest host at 20 min, then at 40 min\n")
    print("| arm | failures | requests sent again | lost | cold starts (cache/peer/repo) | mean cold start s | "
          "mean e2e ms | p99 e2e ms | replica-s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for arm in ("baseline", "lc+mc"):
        fail = ""
        for failed in (False, True):
            keys = dict(ARMS[arm], policy="arrival_rate", headroom="1.25")
            label = f"failure-{arm}{'-failed' if failed else ''}"
            s = sim(args.ember, work, trace, keys, label, {"sim.failures": fail} if failed else {})
            if not failed:  # the busiest hosts of this arm's run without failures
                with open(os.path.join(work, "runs", label, "requests.csv")) as f:
                    rows = [r for r in csv.DictReader(f) if r["lost"] == "0"]
                chosen = []
                for minute in (20, 40):
                    counts = {}
                    for r in rows:
                        if (minute - 1) * 60 <= float(r["time_s"]) < minute * 60 and r["host"] not in chosen:
                            counts[r["host"]] = counts.get(r["host"], 0) + 1
                    chosen.append(max(sorted(counts), key=lambda h: counts[h]))
                fail = f"{chosen[0]}@20min, {chosen[1]}@40min"
            s.update(arm=arm, failures=fail if failed else "none")
            results.setdefault("failure", []).append(s)
            c = s["cold_starts"]
            print(f"| {arm} | {s['failures']} | {s['retried']} | {s['lost']} | {c['cache']['count']}/{c['peer']['count']}/"
                  f"{c['repository']['count']} | {s['cold_start_mean_ms'] / 1000:.2f} | {s['mean_ms']:.0f} | "
                  f"{s['p99_ms']:.0f} | {s['replica_seconds']:.0f} |", flush=True)


def plot(path, results, models, arms):
    """Per trace: mean cold start and mean end-to-end per model (mean over policies), one bar per
    arm, log scale; and the cloud-bandwidth sweep when it ran."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kinds = sorted({r["trace"] for r in results["runs"]}, reverse=True)
    rows = len(kinds) + (1 if results.get("sweep") else 0)
    fig, axes = plt.subplots(rows, 2, figsize=(13, 3.6 * rows), squeeze=False)
    width = 0.8 / len(arms)
    for k, kind in enumerate(kinds):
        for col, (key, label) in enumerate((("cold_start_mean_ms", "mean cold start s"), ("mean_ms", "mean end-to-end s"))):
            ax = axes[k][col]
            for a, arm in enumerate(arms):
                ys = []
                for m in models:
                    xs = [r[key] / 1000 for r in results["runs"] if r["trace"] == kind and r["model"] == m and r["arm"] == arm]
                    ys.append(statistics.mean(xs) if xs else 0)
                ax.bar([i + a * width for i in range(len(models))], ys, width, label=arm)
            ax.set_xticks([i + width * (len(arms) - 1) / 2 for i in range(len(models))], models)
            ax.set_yscale("log")
            ax.set_ylabel(label)
            ax.set_title(f"{kind}: {label} (mean over policies)")
            ax.legend(fontsize=8)
    if results.get("sweep"):
        for col, (key, label) in enumerate((("cold_start_mean_ms", "mean cold start s"), ("mean_ms", "mean end-to-end s"))):
            ax = axes[-1][col]
            for arm in ("baseline", "mc", "lc+mc"):
                pts = [(float(r["sweep"].split("G")[0]), r[key] / 1000) for r in results["sweep"] if r["arm"] == arm]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=arm)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("cloud link Gbit/s")
            ax.set_ylabel(label)
            ax.set_title(f"cloud-bandwidth sweep ({models[-1]}, atl, Twitter-like)")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
