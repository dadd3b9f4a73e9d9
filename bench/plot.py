"""Throughput over time for router_fresh and replay_duplicates, from their results JSON.

Needs matplotlib (not a runtime dependency); without it the plot is skipped with a note.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

from bench.common import RESULTS

COMMITTED = Path(__file__).resolve().parent / "throughput.png"


def _rate(series: list[list[float]]) -> tuple[list[float], list[float]]:
    ts, rs = [], []
    for (t0, c0), (t1, c1) in itertools.pairwise(series):
        if t1 > t0:
            ts.append(t1)
            rs.append((c1 - c0) / (t1 - t0))
    return ts, rs


def plot() -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install matplotlib)")
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = (
        ("router_fresh", ("router", "series"), ("raw_start", "ceiling"), "fresh starts/s"),
        ("replay_duplicates", ("replay", "series"), ("raw_duplicate", "ceiling"), "events/s"),
    )
    for ax, (name, path, base, ylabel) in zip(axes, panels, strict=True):
        f = RESULTS / f"{name}.json"
        if not f.exists():
            ax.set_title(f"{name}: no results")
            continue
        data = json.loads(f.read_text())
        ts, rs = _rate(data[path[0]][path[1]])
        ax.plot(ts, rs, label=name)
        ax.axhline(data[base[0]][base[1]], color="red", linestyle="--", label=f"raw {base[0]}")
        ax.set_title(f"{name} (ratio {data['ratio']})")
        ax.set_xlabel("seconds")
        ax.set_ylabel(ylabel)
        ax.legend()
    fig.tight_layout()
    out = RESULTS / "throughput.png"
    fig.savefig(out, dpi=100)
    shutil.copyfile(out, COMMITTED)
    print(f"plot: {out} (copied to {COMMITTED})")
    return out


if __name__ == "__main__":
    plot()
