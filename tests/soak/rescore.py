"""Score a finished soak's folder again with today's analysis (``tests/soak/analysis.py``).

``python -m tests.soak.rescore DIR [--window S]`` reads ``samples.jsonl`` and ``faults.log``
from a soak's output folder and prints each process kind's RSS growth (:func:`rss_growth`,
from ``--window`` s after the first sample, each successor's own first window left out as
the soak does) and what each fault left in each process's RSS (:func:`rss_steps`). With
``runs.csv`` (soaks from 2026-12-07 on) it also prints each fault's p99 recovery
(:func:`recovery`) and, per fault, the p99 of each 5-s bin of events produced in the
``--drain`` s after its end (:func:`p99_bins`): how its backlog drained. For a run recorded
before a figure existed, or to try a new figure on an old run.

``faults.log`` stamps its lines with the local ``HH:MM:SS``; they are placed on the day of
the first sample, a day later whenever the clock goes back (a run over midnight).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

from tests.soak import report
from tests.soak.analysis import (
    Fault,
    ProcSample,
    Run,
    Sample,
    p99_bins,
    recovery,
    rss_growth,
    rss_steps,
    start_points,
)


def load_samples(path: Path) -> list[Sample]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            procs = {k: ProcSample(**v) for k, v in d.pop("procs").items()}
            out.append(Sample(procs=procs, **d))
    return out


def load_faults(path: Path, first: float) -> list[Fault]:
    """Faults from ``faults.log``: a begin line and its end line make one :class:`Fault`
    (a fault that never ended ends where it began)."""
    day = datetime.fromtimestamp(first).replace(hour=0, minute=0, second=0, microsecond=0)
    out: list[Fault] = []
    open_: dict[str, Fault] = {}
    last = -1.0
    for line in path.read_text().splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) < 3 or parts[1] not in ("begin", "end"):
            continue
        h, m, s = (int(x) for x in parts[0].split(":"))
        t = (day + timedelta(hours=h, minutes=m, seconds=s)).timestamp()
        if t < last:
            day += timedelta(days=1)
            t += 86400
        last = t
        if parts[1] == "begin":
            open_[parts[2]] = fault = Fault(parts[2], t, t)
            out.append(fault)
        elif parts[2] in open_:
            open_.pop(parts[2]).end = t
    return out


def load_runs(path: Path) -> list[Run]:
    """The runs of ``runs.csv`` (``dataclasses.asdict`` of each :class:`Run`)."""

    def at(value: str) -> float | None:
        return float(value) if value else None

    with path.open(newline="") as f:
        return [
            Run(
                row["workflow_id"],
                row["kind"],
                at(row["produced"]),
                at(row["started"]),
                at(row["finished"]),
                row["latency"] == "True",
            )
            for row in csv.DictReader(f)
        ]


def recovery_lines(runs: list[Run], faults: list[Fault], drain: float) -> list[str]:
    points = start_points(runs)
    if not points:
        return ["runs.csv: no latency run started"]
    end = max(p for p, _ in points)
    rows = recovery(faults, points, end=end)
    lines = ["", "p99 produce-to-start recovery after each fault's end"]
    lines += report.table(rows, report.RECOVERY_COLUMNS)
    lines += ["", f"p99 (s) per 5-s bin of events produced in the {drain:g} s after each end"]
    for f in faults:
        bins = p99_bins(points, f.end, min(f.end + drain, end))
        lines.append(f"{f.kind:<20} " + " ".join("-" if b is None else f"{b:g}" for b in bins))
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak.rescore", description=__doc__)
    p.add_argument("dir", type=Path, help="a soak's output folder (test_soak0)")
    p.add_argument("--window", type=float, default=300.0, help="the run's first window, s")
    p.add_argument("--drain", type=float, default=90.0, help="s of bins after each fault")
    args = p.parse_args(argv)
    samples = load_samples(args.dir / "samples.jsonl")
    if not samples:
        print(f"{args.dir / 'samples.jsonl'}: no samples", file=sys.stderr)
        return 1
    faults = load_faults(args.dir / "faults.log", samples[0].t)
    growth = rss_growth(samples, after=samples[0].t + args.window, settle=args.window)
    print("\n".join(report.memory_lines(growth, rss_steps(samples, faults))))
    if (args.dir / "runs.csv").exists():
        print("\n".join(recovery_lines(load_runs(args.dir / "runs.csv"), faults, args.drain)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
