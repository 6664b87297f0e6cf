#!/usr/bin/env python3
"""Plot loom-bench CSV files against message size, loom vs NCCL: busbw, time
per call, and loom's speed-up (NCCL's time / loom's; above 1: loom faster).

usage: plot_bench.py OUT.png TITLE bench_np4.csv [bench_np2.csv ...]
Needs matplotlib (Debian: python3-matplotlib). One panel per CSV file.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["bytes"]), float(r["loom_busbw_GBs"]), float(r["nccl_busbw_GBs"]),
             float(r["loom_us"]), float(r["nccl_us"])) for r in rows]


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, title, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    fig, axes = plt.subplots(3, len(files), figsize=(6 * len(files), 11), squeeze=False)
    for col, path in enumerate(files):
        rows = load(path)
        sizes = [r[0] for r in rows]
        name = os.path.splitext(os.path.basename(path))[0]
        bw, lat, ratio = axes[0][col], axes[1][col], axes[2][col]
        bw.plot(sizes, [r[1] for r in rows], "o-", label="loom (MPI collective)")
        bw.plot(sizes, [r[2] for r in rows], "s--", label="NCCL")
        bw.set_ylabel("busbw (GB/s)")
        lat.plot(sizes, [r[3] for r in rows], "o-", label="loom")
        lat.plot(sizes, [r[4] for r in rows], "s--", label="NCCL")
        lat.set_ylabel("time per call (us)")
        lat.set_yscale("log")
        ratio.plot(sizes, [r[4] / r[3] if r[3] > 0 and r[4] > 0 else float("nan") for r in rows], "o-",
                   label="NCCL time / loom time")
        ratio.axhline(1.0, color="gray", linewidth=1)
        ratio.set_ylabel("speed-up over NCCL")
        for ax in (bw, lat, ratio):
            ax.set_xscale("log", base=2)
            ticks = [s for s in sizes if s in (8, 1024, 65536, 1 << 20, 1 << 24, 1 << 30)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([human(s) for s in ticks])
            ax.set_xlabel("message size")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        bw.set_title(f"{title}\n{name}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main()
