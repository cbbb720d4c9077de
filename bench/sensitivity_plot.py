#!/usr/bin/python3
"""Layer sensitivity against size (AsyFunc's Fig. 2) for Ember's reference architectures: not a test.

For each architecture it writes the full-size model (`ember model new`), profiles it on the simulated
device (`ember model profile`: every layer timed at batches 1, 2, 4 and 8), reads the profile back
(`ember model inspect --profile --json`) and plots, per layer with weights, the sensitivity (its time
at batch 4 minus batch 2, us) against its weight bytes, one panel per architecture, convolutions,
linear layers and normalisations marked apart. It prints Spearman's rank correlation of sensitivity
with weight bytes and with multiply-adds per byte (AsyFunc's ranking proxy), over all layers with
weights and over the convolution or linear layers alone.

Runs with /usr/bin/python3 (numpy, matplotlib).

  bench/sensitivity_plot.py [--ember build/bin/ember] [--arch resnet50,bert-base,gpt2]
                            [--plot bench/sensitivity.png] [--work DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    return float(np.corrcoef(rx, ry)[0, 1])


def profile(ember, arch, work):
    d = os.path.join(work, arch, "1")
    if not os.path.exists(os.path.join(d, "profile.json")):
        subprocess.run([ember, "model", "new", "--arch", arch, "--out", d], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([ember, "model", "profile", d, "--batches", "1,2,4,8"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([ember, "model", "inspect", "--profile", "--json", d], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "ember"))
    ap.add_argument("--arch", default="resnet50,bert-base,gpt2")
    ap.add_argument("--plot", default=os.path.join(os.path.dirname(__file__), "sensitivity.png"))
    ap.add_argument("--work", default=None, help="keep the models and profiles here (default: a temporary folder)")
    a = ap.parse_args()
    archs = a.arch.split(",")
    work = a.work or tempfile.mkdtemp(prefix="ember-sensitivity-")
    fig, axes = plt.subplots(1, len(archs), figsize=(5 * len(archs), 4.2), squeeze=False)
    print("| architecture | layers with weights | sensitivity ~ bytes | sensitivity ~ MACs/byte | "
          "conv/linear only: ~ bytes | ~ MACs/byte |")
    print("|---|---|---|---|---|---|")
    for ax, arch in zip(axes[0], archs):
        p = profile(a.ember, arch, work)
        layers = [x for x in p["layers"] if x["bytes"] > 0 and "sensitivity_us" in x]
        if not layers:
            print(f"{arch}: no layer with weights and a sensitivity", file=sys.stderr)
            continue
        main_ops = [x for x in layers if x["op"] in ("conv2d", "linear")]

        def corr(ls):
            s = [x["sensitivity_us"] for x in ls]
            return (spearman(s, [x["bytes"] for x in ls]), spearman(s, [x["macs"] / x["bytes"] for x in ls]))

        c_all, c_main = corr(layers), corr(main_ops)
        print(f"| {arch} | {len(layers)} | {c_all[0]:.2f} | {c_all[1]:.2f} | {c_main[0]:.2f} | {c_main[1]:.2f} |")
        for ops, colour, label in ((("conv2d",), "tab:blue", "conv"), (("linear",), "tab:orange", "linear"),
                                   (None, "tab:gray", "other (norms, embeddings)")):
            pick = [x for x in layers if (x["op"] in ops if ops else x["op"] not in ("conv2d", "linear"))]
            if pick:
                ax.scatter([x["bytes"] for x in pick], [max(x["sensitivity_us"], 0.1) for x in pick], s=10,
                           c=colour, label=label, alpha=0.7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("weight bytes of the layer")
        ax.set_ylabel("time at batch 4 - batch 2 (us)")
        ax.set_title(f"{arch} (rank corr. {c_all[0]:.2f})")
        ax.legend(fontsize=8)
    fig.suptitle(f"Layer sensitivity against size on {p['device']} (AsyFunc Fig. 2)")
    fig.tight_layout()
    fig.savefig(a.plot, dpi=110)
    print(f"wrote {a.plot}")


if __name__ == "__main__":
    main()
