"""The soak's outputs: ``soak.json``, ``windows.csv``, ``runs.csv`` (one row per run, its
event's produce time and the run's start and finish: ``tests.soak.rescore`` computes the
recoveries again from it), ``timeline.png`` and the table.

All go to the test's tmp dir (and are named at the end of the run). The PNG is one
timeline, minutes on the x axis, with every fault marked across all panels (a shaded
span from its start to its end, labelled on the top panel): runs/s and the latency
percentiles per window, RSS and open fds of every pipeline process and PostgreSQL
connections per sample, and the Kafka lag of the two consumer groups.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from tests.soak.analysis import MB, Fault, Sample

TABLE: list[str] = []  # the run's figures, printed at the end of the session (conftest.py)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows(rows)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    """Aligned text lines, as the fault harness prints its figures."""
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return lines


def step_rows(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per fault of ``analysis.rss_steps``: per process ``before→after (peak)`` MB,
    with ``new`` when the process after the fault is another one."""
    rows = []
    for step in steps:
        row: dict[str, Any] = {"kind": step["kind"]}
        for proc, v in step.items():
            if proc == "kind":
                continue
            row[proc] = f"{v['before_mb']}→{v['after_mb']} ({v['peak_mb']})" + (
                " new" if v["new_pid"] else ""
            )
        rows.append(row)
    return rows


def memory_lines(growth: dict[str, dict[str, Any]], steps: Sequence[dict[str, Any]]) -> list[str]:
    """The RSS figures as the soak prints them and ``tests.soak.rescore`` prints them again:
    each kind's growth (``analysis.rss_growth``), then each fault's step per process
    (``analysis.rss_steps``)."""
    lines = table(
        [{"process": k, **v} for k, v in sorted(growth.items())],
        ("process", "pid", "span_min", "rss_mb", "growth_mb", "mb_per_h", "mb_per_h_unsettled"),
    )
    lines += ["", "RSS MB per fault: median before → median 2-4.5 min after (peak)"]
    lines += table(step_rows(steps), ("kind", "ingress", "router", "worker", "relay"))
    return lines


RECOVERY_COLUMNS = ("kind", "pre_p99", "target", "peak_p99", "recovered_s")

WINDOW_COLUMNS = (
    "t",
    "runs_per_s",
    "produced",
    "start_p50",
    "start_p99",
    "finish_p50",
    "finish_p99",
    "rss_mb_ingress",
    "rss_mb_router",
    "rss_mb_worker",
    "rss_mb_relay",
    "fds_worker",
    "pg_connections",
    "lag_ingress",
    "lag_router",
    "lag_s_router",
    "faults",
)


def plot(
    path: Path,
    t0: float,
    windows: Sequence[dict[str, Any]],
    samples: Sequence[Sample],
    faults: Sequence[Fault],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(5, 1, figsize=(13, 15), sharex=True)
    mid = [(w["t"] + w["seconds"] / 2) / 60 for w in windows]
    ax = axes[0]
    ax.step(mid, [w["runs_per_s"] for w in windows], where="mid", label="finished runs/s")
    ax.set_ylabel("runs/s")
    ax.set_ylim(bottom=0)
    ax = axes[1]
    nan = float("nan")  # a window without a latency event: a gap, not a zero
    for col, style in (
        ("start_p50", "-"),
        ("start_p99", "-"),
        ("finish_p50", "--"),
        ("finish_p99", "--"),
    ):
        values = [nan if w[col] is None else w[col] for w in windows]
        ax.plot(mid, values, style, marker="o", label=col.replace("_", " "))
    ax.set_ylabel("seconds from produce")
    ax.set_yscale("symlog", linthresh=1)
    ts = [(s.t - t0) / 60 for s in samples]
    ax = axes[2]
    for kind in ("ingress", "router", "worker", "relay"):
        pts = [
            (x, s.procs[kind].rss / MB) for x, s in zip(ts, samples, strict=True) if kind in s.procs
        ]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"{kind} RSS")
    ax.set_ylabel("RSS MB")
    ax = axes[3]
    for kind in ("ingress", "router", "worker", "relay"):
        pts = [(x, s.procs[kind].fds) for x, s in zip(ts, samples, strict=True) if kind in s.procs]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"{kind} fds")
    pg = [
        (x, s.pg_connections)
        for x, s in zip(ts, samples, strict=True)
        if s.pg_connections is not None
    ]
    ax.plot([p[0] for p in pg], [p[1] for p in pg], "k:", label="PostgreSQL connections")
    ax.set_ylabel("open fds / connections")
    ax = axes[4]
    for group in ("ingress", "router"):
        pts = [(x, s.lag[group]) for x, s in zip(ts, samples, strict=True) if group in s.lag]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"{group} lag (messages)")
    ax.set_ylabel("lag, messages")
    twin = ax.twinx()
    pts = [
        (x, s.lag_seconds["router"])
        for x, s in zip(ts, samples, strict=True)
        if "router" in s.lag_seconds
    ]
    twin.plot([p[0] for p in pts], [p[1] for p in pts], "r:", label="router lag (s)")
    twin.set_ylabel("router lag, s")
    axes[4].set_xlabel("minutes since the soak began")
    for f in faults:
        a, b = (f.start - t0) / 60, (f.end - t0) / 60
        for ax in axes:
            ax.axvspan(a, max(b, a + 0.05), color="tab:red", alpha=0.15)
        axes[0].annotate(
            f.kind,
            (a, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=60,
            fontsize=7,
            va="bottom",
            color="tab:red",
        )
    for ax in axes:
        ax.legend(loc="upper right", fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, y=0.995)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
