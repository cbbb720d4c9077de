#!/usr/bin/python3
"""The simulator against the live cluster (issue 36; docs/design/simulator.md#validation). For each
seed, bench/autoscale_replay.py replays its Azure Functions slice on the network-namespace cluster
(needs root) for each arm and writes the very requests it sent (--write-trace); then `ember sim`
replays that file on deploy/sim/netns.yaml (the same four nodes, links and repository) with the
arm's own `autoscale:` keys (taken from autoscale_replay.ARMS, so the two cannot differ) and the
replay's models' profiles (`ember model profile --threads 1`, measured on this machine's simulated
device with one compute thread, as the live nodes execute; measured before the replay, with
--profile, so that the live manager plans with the same profile.json the simulated one reads). Prints, per arm, the live figures (mean over seeds, and their spread: min
to max) beside the simulated ones and the simulator's error on mean end-to-end latency, mean cold
start per tier, replica-seconds and p99.

  sudo bench/sim_validate.py [--ember build/bin/ember] [--seeds 1,2] [--arms knative,ember-ongoing,...]
                             [--work DIR] [--sim-only] [replay options: --functions 12 --minutes 40 ...]

--sim-only reuses DIR's live results (DIR/seed-N/replay.json) and reruns only the simulations.
Writes DIR/validation.json.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPLAY = os.path.join(ROOT, "bench", "autoscale_replay.py")
TIERS = ("cache", "peer", "repository")


def load_arms():
    spec = importlib.util.spec_from_file_location("autoscale_replay", REPLAY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ARMS


def run_live(args, seed, arms, work, extra):
    os.makedirs(work, exist_ok=True)
    cmd = [sys.executable, REPLAY, "--ember", args.ember, "--seed", str(seed), "--arms", ",".join(arms),
           "--work", work, "--plot", os.path.join(work, "replay.png"),
           "--write-trace", os.path.join(work, "requests.csv"), "--profile"] + extra
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def models_file(args, work):
    """DIR/models.yaml naming each replay model's profile.json (measured once per model)."""
    repo = os.path.join(work, "repo")
    lines = ["models:"]
    for name in sorted(os.listdir(repo)):
        d = os.path.join(repo, name, "1")
        if not os.path.isdir(d):
            continue
        prof = os.path.join(d, "profile.json")
        if not os.path.exists(prof):
            # One compute thread, as the replay's nodes run (--threads 1).
            subprocess.run([args.ember, "model", "profile", d, "--threads", "1", "--log-level", "warn"], check=True,
                           capture_output=True, text=True)
        lines += [f"  - name: {name}", f"    profile: {prof}"]
    path = os.path.join(work, "models.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def run_sim(args, work, arm, keys, models):
    out = os.path.join(work, f"sim-{arm}")
    cmd = [args.ember, "sim", "--cluster", os.path.join(ROOT, "deploy", "sim", "netns.yaml"), "--models", models,
           "--trace", os.path.join(work, "requests.csv"), "--out", out, "--label", arm]
    for k, v in keys.items():
        cmd += ["--set", f"autoscale.{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ember sim ({arm}) failed: {r.stderr.strip()}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def live_figures(summary):
    tiers = summary["cold_start_mean_ms"]
    counts = summary["cold_starts"]
    return {"mean_ms": summary["mean_ms"], "p99_ms": summary["p99_ms"], "replica_seconds": summary["replica_seconds"],
            "lost": summary["lost"], "requests": summary["requests"],
            "cold": {t: (counts.get(t, 0), tiers.get(t, 0.0)) for t in TIERS}}


def sim_figures(s):
    return {"mean_ms": s["mean_ms"], "p99_ms": s["p99_ms"], "replica_seconds": s["replica_seconds"], "lost": s["lost"],
            "requests": s["requests"], "cold": {t: (s["cold_starts"][t]["count"], s["cold_starts"][t]["mean_ms"])
                                                for t in TIERS}}


def err(sim, live):
    return f"{100 * (sim - live) / live:+.0f}%" if live else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "bin", "ember"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--arms", default="knative,ember-ongoing,ember-rate,ember-no-cache,ember-no-chain")
    ap.add_argument("--work", default="sim_validate")
    ap.add_argument("--sim-only", action="store_true")
    args, extra = ap.parse_known_args()
    args.ember = os.path.abspath(args.ember)
    arms_keys = load_arms()
    arms = [a for a in args.arms.split(",") if a]
    for a in arms:
        if a not in arms_keys or arms_keys[a].get("enabled") == "false":
            sys.exit(f"arm {a!r}: not an autoscaling arm of autoscale_replay.py")
    seeds = [int(s) for s in args.seeds.split(",")]
    live, sim = {a: [] for a in arms}, {a: [] for a in arms}
    for seed in seeds:
        work = os.path.abspath(os.path.join(args.work, f"seed-{seed}"))
        if not args.sim_only:
            run_live(args, seed, arms, work, extra)
        with open(os.path.join(work, "replay.json")) as f:
            rows = {r["arm"]: r for r in json.load(f)["arms"]}
        models = models_file(args, work)
        for arm in arms:
            if "summary" not in rows.get(arm, {}):
                print(f"seed {seed}: arm {arm} has no live result; skipped")
                continue
            live[arm].append(live_figures(rows[arm]["summary"]))
            sim[arm].append(sim_figures(run_sim(args, work, arm, arms_keys[arm], models)))

    print(f"\nlive (mean over seeds {args.seeds}; spread min..max) against simulated, per arm:\n")
    print("| arm | figure | live | live spread | simulated | error |")
    print("|---|---|---:|---:|---:|---:|")
    table = {}
    for arm in arms:
        if not live[arm]:
            continue

        def row(name, get, fmt="{:.0f}"):
            lv = [get(x) for x in live[arm]]
            sv = [get(x) for x in sim[arm]]
            lm, sm = statistics.mean(lv), statistics.mean(sv)
            spread = f"{fmt.format(min(lv))}..{fmt.format(max(lv))}"
            print(f"| {arm} | {name} | {fmt.format(lm)} | {spread} | {fmt.format(sm)} | {err(sm, lm)} |")
            table.setdefault(arm, {})[name] = {"live": lv, "sim": sv}

        row("mean e2e ms", lambda x: x["mean_ms"])
        row("p99 e2e ms", lambda x: x["p99_ms"])
        for t in TIERS:
            if any(x["cold"][t][0] for x in live[arm] + sim[arm]):
                row(f"cold starts from {t}", lambda x, t=t: x["cold"][t][0])
                row(f"mean cold start ms ({t})", lambda x, t=t: x["cold"][t][1])
        row("replica-s", lambda x: x["replica_seconds"])
        row("lost", lambda x: x["lost"])
    with open(os.path.join(args.work, "validation.json"), "w") as f:
        json.dump({"seeds": seeds, "arms": table}, f, indent=1)
    print(f"\nresults: {os.path.join(args.work, 'validation.json')}")


if __name__ == "__main__":
    main()
