#!/usr/bin/python3
"""Device memory over time under bursts, from burst_bench's --memory-csv: not a test.

One panel per CSV (a model), one line per variant: the weights of the model's full copies plus its
Shadows, summed over the node's devices, as the node's gauges showed them every --sample-ms; the
bursts shaded (--cycle and --burst as given to burst_bench).

Runs with /usr/bin/python3 (matplotlib).

  bench/burst_plot.py --csv /tmp/burst_resnet.csv --title "ResNet-50 (tiny)" \
                      --csv /tmp/burst_bert.csv --title "BERT-base" [--cycle 10 --burst 3] \
                      [--plot bench/burst_memory.png]
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    series = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            t, m = series.setdefault(row["variant"], ([], []))
            t.append(float(row["seconds"]))
            m.append((int(row["weights_bytes"]) + int(row["shadow_bytes"])) / 2**20)
    return series


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", action="append", required=True, help="burst_bench --memory-csv output")
    ap.add_argument("--title", action="append", default=[], help="each CSV's panel title, in order")
    ap.add_argument("--cycle", type=float, default=10)
    ap.add_argument("--burst", type=float, default=3)
    ap.add_argument("--plot", default="bench/burst_memory.png")
    a = ap.parse_args()
    fig, axes = plt.subplots(len(a.csv), 1, figsize=(9, 3.2 * len(a.csv)), squeeze=False)
    for k, path in enumerate(a.csv):
        ax = axes[k][0]
        series = read(path)
        end = max(max(t) for t, _ in series.values())
        start = a.cycle - a.burst
        while start < end:
            ax.axvspan(start, min(start + a.burst, end), color="0.9")
            start += a.cycle
        for variant, (t, m) in series.items():
            ax.plot(t, m, label=variant, linewidth=1)
        ax.set_title(a.title[k] if k < len(a.title) else path)
        ax.set_ylabel("device memory (MiB)")
        ax.legend(loc="upper left", fontsize=8)
    axes[-1][0].set_xlabel("seconds (bursts shaded)")
    fig.tight_layout()
    fig.savefig(a.plot, dpi=110)
    print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
