"""Throughput over time for router_fresh and replay_duplicates, and e2e's (a)/(b)/(c) bars,
from their results JSON.

Needs matplotlib (not a runtime dependency); without it the plot is skipped with a note.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

from bench.cli import parse_args
from bench.common import RESULTS

COMMITTED = Path(__file__).resolve().parent / "throughput.png"


def _rate(series: list[list[float]]) -> tuple[list[float], list[float]]:
    ts, rs = [], []
    for (t0, c0), (t1, c1) in itertools.pairwise(series):
        if t1 > t0:
            ts.append(t1)
            rs.append((c1 - c0) / (t1 - t0))
    return ts, rs


def _e2e(ax: Any) -> None:
    """Finished runs/s of (a) bare Temporal, (b) RunActivityWorkflow, (c) the pipeline."""
    f = RESULTS / "e2e.json"
    if not f.exists():
        ax.set_title("e2e: no results")
        return
    shapes = json.loads(f.read_text())["shapes"]
    in_flight = shapes[0]["a"].get("in_flight", "?") if shapes else "?"
    width = 0.2
    kinds = (
        ("a", "(a) bare"), ("a_local", "(a) bare, local activity"),
        ("b", "(b) workflow"), ("c", "(c) pipeline"),
    )  # fmt: skip
    for j, (kind, label) in enumerate(kinds):
        xs = [i + (j - 1.5) * width for i in range(len(shapes))]
        ax.bar(xs, [s.get(kind, {}).get("runs_per_second", 0) for s in shapes], width, label=label)
    ax.set_xticks(
        range(len(shapes)),
        [f"{s['tasks']} task(s)\nb/a {s['b_a']}, c/b {s['c_b']}" for s in shapes],
    )
    ax.set_ylabel("finished runs/s")
    ax.set_title(f"e2e, {in_flight} runs in flight (goals b/a >= 0.85, c/b >= 0.9)")
    ax.legend()


def plot() -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install matplotlib)")
        return None
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    panels = (
        ("router_fresh", ("router", "series"), ("raw_start", "ceiling"), "fresh starts/s"),
        ("replay_duplicates", ("replay", "series"), ("raw_duplicate", "ceiling"), "events/s"),
    )
    for ax, (name, path, base, ylabel) in zip(axes[:2], panels, strict=True):
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
    _e2e(axes[2])
    fig.tight_layout()
    out = RESULTS / "throughput.png"
    fig.savefig(out, dpi=100)
    shutil.copyfile(out, COMMITTED)
    print(f"plot: {out} (copied to {COMMITTED})")
    return out


if __name__ == "__main__":
    parse_args(__doc__, stack=False)
    plot()
