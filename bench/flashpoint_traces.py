#!/usr/bin/python3
"""Writes the two request traces of Flashpoint's full-scale experiment as `ember sim` reads them
(CSV `time_s,model`), for one model at a time, as Flashpoint ran them (docs/design/simulator.md,
../shared/seeds/digest-flashpoint.md §4.2). Deterministic: the same seed writes the same file.

  bench/flashpoint_traces.py twitter OUT.csv [--model m] [--seed 1] [--minutes 60]
  bench/flashpoint_traces.py azure   OUT.csv [--model m] [--seed 1] [--minutes 60]
                                     [--traces ../shared/traces/azure-functions-2019]

twitter: Twitter-like, synthesized (the Archive Team stream of 2018-04 is not on this machine).
  Flashpoint's one-hour Twitter trace has a median of 57 requests per second and a peak-to-median
  of 4.68 (its Fig. 3.2 shows bursts at 456 s and 1,462 s). The rate per second is
  57 x m(t): m(t) = exp(0.25 x x(t)) x (1 + bursts(t)), with x(t) an AR(1) process (phi 0.98,
  unit variance, seeded) for the stream's slow wander, and bursts at 456 s and 1,462 s (Fig. 3.2)
  plus three more at seeded times, each rising in 5 s and decaying with a 40 s time constant;
  m is divided by its median and the bursts' heights are solved (bisection) so that max(m) = 4.68.
  Each second's requests are Poisson(57 m(t)) at uniform times within the second.

azure: the Azure Functions 2019 sample (400_inv.csv: invocations per minute of 400 functions over
  a day). Flashpoint does not say how it mapped functions to its models; here every function's
  invocations are summed per minute (one model takes all of the sample's load, as Flashpoint ran
  one model at a time), the hour (any start minute) whose peak-to-median per-minute total is closest
  to Flashpoint's 2.54 is taken, and the totals are scaled so that the hour's median is 18 requests
  per second (Flashpoint's). Each minute's requests are Poisson(total x scale) at uniform times
  within the minute.

Prints the trace's realized median and peak requests per second (per second for twitter, per
minute / 60 for azure) and its size.
"""
import argparse
import csv
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACES = os.path.join(os.path.dirname(ROOT), "shared", "traces", "azure-functions-2019")


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def poisson(rng, lam):
    # Knuth's method in pieces of 500 (exp(-500) underflows nothing in doubles).
    total = 0
    while lam > 0:
        step = min(lam, 500.0)
        lam -= step
        limit, k, p = math.exp(-step), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                break
            k += 1
        total += k
    return total


def twitter_rates(seconds, seed, median_rps=57.0, peak=4.68):
    rng = random.Random(seed)
    x, wander = 0.0, []
    for _ in range(seconds):
        x = 0.98 * x + math.sqrt(1 - 0.98 ** 2) * rng.gauss(0, 1)
        wander.append(math.exp(0.25 * x))
    starts = [456, 1462] + [rng.uniform(60, seconds - 120) for _ in range(3)]
    starts = [s for s in starts if s < seconds - 30]

    def shape(t):
        b = 0.0
        for s in starts:
            d = t - s
            if 0 <= d < 5:
                b += d / 5
            elif d >= 5:
                b += math.exp(-(d - 5) / 40)
        return b

    bursts = [shape(t) for t in range(seconds)]

    def m_of(h):
        m = [w * (1 + h * b) for w, b in zip(wander, bursts)]
        med = median(m)
        return [v / med for v in m]

    lo, hi = 0.0, 100.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if max(m_of(mid)) < peak:
            lo = mid
        else:
            hi = mid
    return [median_rps * v for v in m_of(hi)]


def twitter(args):
    seconds = args.minutes * 60
    rates = twitter_rates(seconds, args.seed)
    rng = random.Random(args.seed + 1)
    times, per_second = [], []
    for s, lam in enumerate(rates):
        n = poisson(rng, lam)
        per_second.append(n)
        times.extend(s + rng.random() for _ in range(n))
    return sorted(times), per_second


def azure(args):
    path = os.path.join(args.traces, "400_inv.csv")
    totals = None
    with open(path) as f:
        r = csv.reader(f)
        next(r)
        for row in r:
            counts = [int(v) for v in row[3:]]
            totals = counts if totals is None else [a + b for a, b in zip(totals, counts)]
    best = None
    for start in range(0, len(totals) - args.minutes + 1):
        w = totals[start:start + args.minutes]
        med = median(w)
        if med <= 0:
            continue
        score = abs(max(w) / med - 2.54)
        if best is None or score < best[0]:
            best = (score, start)
    start = best[1]
    window = totals[start:start + args.minutes]
    scale = 18.0 * 60 / median(window)
    rng = random.Random(args.seed)
    times, per_minute = [], []
    for i, total in enumerate(window):
        n = poisson(rng, total * scale)
        per_minute.append(n / 60)
        times.extend(60 * (i + rng.random()) for _ in range(n))
    print(f"azure: {os.path.relpath(path)}, minutes {start}..{start + args.minutes} of the day "
          f"(peak/median of the sum {max(window) / median(window):.2f}), scale {scale:.4f}")
    return sorted(times), per_minute


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["twitter", "azure"])
    ap.add_argument("out")
    ap.add_argument("--model", default="m")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--traces", default=TRACES)
    args = ap.parse_args()
    if args.minutes < 2:
        sys.exit("--minutes must be at least 2")
    times, rates = twitter(args) if args.kind == "twitter" else azure(args)
    with open(args.out, "w") as f:
        f.write("time_s,model\n")
        for t in times:
            f.write(f"{t:.6f},{args.model}\n")
    med = median(rates)
    print(f"{args.kind}: {len(times)} requests over {args.minutes} min; requests/s median {med:.1f}, "
          f"peak {max(rates):.1f} ({max(rates) / med:.2f}x the median) -> {args.out}")


if __name__ == "__main__":
    main()
