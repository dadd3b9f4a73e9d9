"""The soak's figures, computed after the run from what it recorded (pure functions).

Inputs: one :class:`Run` per ``activity_runs`` row (with the produce time of its event
when it has one), the live :class:`Sample` series (``tests/soak/sampler.py``) and the
:class:`Fault` log. Outputs: one row per window (:func:`windows`), the RSS growth per
process kind (:func:`rss_growth`), what each fault left in each process's RSS
(:func:`rss_steps`) and the p99 recovery after each fault (:func:`recovery`). Times
are UNIX seconds on this machine's clock, which the database server shares
(``activity_runs`` times are ``now()`` on it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

MB = 1024 * 1024


@dataclass(frozen=True)
class Run:
    workflow_id: str
    kind: str  # the workload class (tests/soak/workload.py), e.g. "plain"
    produced: float | None  # the event's append time on the raw topic, if it has one event
    started: float | None
    finished: float | None
    latency: bool  # counted in the latency figures (no deliberate wait in its path)


@dataclass(frozen=True)
class ProcSample:
    pid: int
    rss: int  # bytes
    fds: int


@dataclass
class Sample:
    t: float
    procs: dict[str, ProcSample] = field(default_factory=dict)
    pg_connections: int | None = None
    lag: dict[str, int] = field(default_factory=dict)  # group kind -> messages
    lag_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Fault:
    kind: str
    start: float
    end: float
    detail: dict[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def windows(
    t0: float,
    t1: float,
    width: float,
    runs: Iterable[Run],
    samples: Sequence[Sample],
    faults: Sequence[Fault],
) -> list[dict[str, Any]]:
    """One row per ``width`` seconds from ``t0`` to ``t1`` (the last one may be shorter):
    finished runs/s; p50/p99 seconds from produce to start and to finish of the latency
    runs produced in it; the peak RSS (MB) and open fds per process kind, PostgreSQL
    connections, Kafka lag (messages and seconds) per group sampled in it; the faults
    that began in it."""
    runs = list(runs)
    rows: list[dict[str, Any]] = []
    a = t0
    while a < t1 - 1e-9:
        b = min(a + width, t1)
        finished = [r for r in runs if r.finished is not None and a <= r.finished < b]
        mine = [r for r in runs if r.latency and r.produced is not None and a <= r.produced < b]
        to_start = [r.started - r.produced for r in mine if r.started and r.produced]
        to_finish = [r.finished - r.produced for r in mine if r.finished and r.produced]
        row: dict[str, Any] = {
            "t": round(a - t0),
            "seconds": round(b - a),
            "runs_per_s": round(len(finished) / (b - a), 2),
            "produced": len(mine),
            "start_p50": _r(percentile(to_start, 50)),
            "start_p99": _r(percentile(to_start, 99)),
            "finish_p50": _r(percentile(to_finish, 50)),
            "finish_p99": _r(percentile(to_finish, 99)),
            "faults": " ".join(f.kind for f in faults if a <= f.start < b),
        }
        inside = [s for s in samples if a <= s.t < b]
        kinds = sorted({k for s in inside for k in s.procs})
        for kind in kinds:
            procs = [s.procs[kind] for s in inside if kind in s.procs]
            row[f"rss_mb_{kind}"] = round(max(p.rss for p in procs) / MB, 1)
            row[f"fds_{kind}"] = max(p.fds for p in procs)
        conns = [s.pg_connections for s in inside if s.pg_connections is not None]
        row["pg_connections"] = max(conns) if conns else None
        for group in sorted({g for s in inside for g in s.lag}):
            row[f"lag_{group}"] = max(s.lag[group] for s in inside if group in s.lag)
        for group in sorted({g for s in inside for g in s.lag_seconds}):
            lags = [s.lag_seconds[group] for s in inside if group in s.lag_seconds]
            row[f"lag_s_{group}"] = round(max(lags), 2)
        rows.append(row)
        a = b
    return rows


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def rss_growth(
    samples: Sequence[Sample], after: float, min_span: float = 120, settle: float = 0.0
) -> dict[str, dict[str, Any]]:
    """Per process kind, the RSS growth of its longest-lived process: ``mb_per_h``
    (least-squares slope), ``growth_mb`` (last minus first sample) and ``span_min``, from
    ``after`` (the run's first window: start-up and warm-up excluded) or, for a process
    started later (a killed one's successor), from ``settle`` s after its first sample (its
    own first window: a new process warms up as the first one did). ``mb_per_h_unsettled``
    is the slope without that second exclusion, as the figure was computed before
    2026-12-06. A kind whose longest life is under ``min_span`` s gets ``mb_per_h`` None
    (too short to say)."""
    born: dict[int, float] = {}  # pid -> its first sample, whenever it was
    series: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for s in samples:
        for kind, p in s.procs.items():
            born.setdefault(p.pid, s.t)
            if s.t >= after:
                series.setdefault((kind, p.pid), []).append((s.t, p.rss / MB))
    out: dict[str, dict[str, Any]] = {}
    for (kind, pid), every in series.items():
        pts = [(t, mb) for t, mb in every if t >= born[pid] + settle]
        span = pts[-1][0] - pts[0][0] if pts else 0.0
        if kind in out and out[kind]["span_s"] >= span:
            continue
        long_enough = span >= min_span and len(pts) >= 3
        out[kind] = {
            "pid": pid,
            "span_s": span,
            "span_min": round(span / 60, 1),
            "growth_mb": round(pts[-1][1] - pts[0][1], 1) if pts else None,
            "mb_per_h": round(_slope(pts) * 3600, 1) if long_enough else None,
            "mb_per_h_unsettled": round(_slope(every) * 3600, 1) if len(every) >= 3 else None,
            "rss_mb": round(every[-1][1], 1),
        }
    return out


def rss_steps(
    samples: Sequence[Sample],
    faults: Sequence[Fault],
    *,
    before: float = 120,
    settle: float = 120,
    until: float = 270,
) -> list[dict[str, Any]]:
    """What each fault left in each process kind's RSS (MB): the median of the ``before``
    s before it began against the median from ``settle`` to ``until`` s after its end
    (cut at the next fault's beginning), its ``peak`` from its beginning to that window's
    end, and ``new_pid`` when the process after it is not the one before it (a kill).
    A high-water mark shows as one large ``step_mb`` and small ones after it; a leak as
    steps that keep coming. None where a side has no sample."""
    ordered = sorted(faults, key=lambda f: f.start)
    kinds = sorted({k for s in samples for k in s.procs})

    def of(kind: str, lo: float, hi: float) -> list[ProcSample]:
        return [s.procs[kind] for s in samples if lo <= s.t < hi and kind in s.procs]

    def median_mb(procs: Sequence[ProcSample]) -> float | None:
        return statistics.median(p.rss / MB for p in procs) if procs else None

    out: list[dict[str, Any]] = []
    for i, f in enumerate(ordered):
        stop = f.end + until
        if i + 1 < len(ordered):
            stop = min(stop, ordered[i + 1].start)
        row: dict[str, Any] = {"kind": f.kind}
        for kind in kinds:
            pre, post = of(kind, f.start - before, f.start), of(kind, f.end + settle, stop)
            peak = of(kind, f.start, stop)
            a, b = median_mb(pre), median_mb(post)
            row[kind] = {
                "before_mb": _r(a, 1),
                "after_mb": _r(b, 1),
                "step_mb": _r(b - a, 1) if a is not None and b is not None else None,
                "peak_mb": _r(max(p.rss for p in peak) / MB, 1) if peak else None,
                "new_pid": bool(pre and post and pre[-1].pid != post[0].pid),
            }
        out.append(row)
    return out


def start_points(runs: Iterable[Run]) -> list[tuple[float, float]]:
    """(produced, seconds from produce to start) of each latency run that started: what
    :func:`recovery` reads."""
    return [
        (r.produced, r.started - r.produced)
        for r in runs
        if r.latency and r.produced is not None and r.started is not None
    ]


def _p99_between(points: Sequence[tuple[float, float]], a: float, b: float) -> float | None:
    """The p99 of the latencies of the points produced in [a, b)."""
    return percentile([lat for p, lat in points if a <= p < b], 99)


def p99_bins(
    points: Sequence[tuple[float, float]], start: float, until: float, bin_s: float = 5
) -> list[float | None]:
    """The p99 of the events produced in each ``bin_s``-second bin from ``start`` to
    ``until``: how a backlog drains after a fault (None for a bin without events)."""
    out = []
    t = start
    while t < until - 1e-9:
        out.append(_r(_p99_between(points, t, t + bin_s), 2))
        t += bin_s
    return out


def recovery(
    faults: Sequence[Fault],
    points: Sequence[tuple[float, float]],
    *,
    end: float,
    before: float = 60,
    horizon: float = 60,
    bin_s: float = 15,
    step: float = 5,
    floor: float = 0.5,
) -> list[dict[str, Any]]:
    """For each fault: ``pre_p99``, the p99 produce-to-start seconds of the events
    produced in the ``before`` s before it began; then, from its end on, the first
    ``bin_s``-second bin of produced events (sliding by ``step``) whose p99 is within
    twice ``pre_p99`` (``pre_p99`` floored at ``floor`` s: below it a doubling is noise):
    ``recovered_s`` is that bin's start after the fault's end, None when no bin within
    ``horizon`` s was, or ``unmeasured`` when production ended before a bin could fill.
    ``peak_p99``: the worst bin in the horizon. ``points``: (produced, seconds to start)."""
    pts = sorted(points)
    out: list[dict[str, Any]] = []
    for f in faults:
        pre = _p99_between(pts, f.start - before, f.start)
        row: dict[str, Any] = {"kind": f.kind, "pre_p99": _r(pre), "recovered_s": None}
        if pre is None or f.end + bin_s > end:
            row["unmeasured"] = True
            out.append(row)
            continue
        target = 2 * max(pre, floor)
        row["target"] = round(target, 3)
        peak = 0.0
        t = f.end
        while t <= f.end + horizon and t + bin_s <= end:
            p99 = _p99_between(pts, t, t + bin_s)
            if p99 is not None:
                peak = max(peak, p99)
                if p99 <= target and row["recovered_s"] is None:
                    row["recovered_s"] = round(t - f.end)
            t += step
        row["peak_p99"] = round(peak, 3)
        out.append(row)
    return out
