"""Fault-injection scenarios: the figures table printed after a full-size run.

``FAULTS_SCALE=full`` (``make faults``) prints, per scenario: events, kills,
restarts, lost (must be 0), duplicate runs (must be 0), DLQ'd and the DLQ count
expected. ``FAULTS_REPORT=1`` prints it at the reduced size too.
"""

from __future__ import annotations

import os
from typing import Any

from tests.faults.cluster import cluster_topics, kafka_cluster  # noqa: F401  (fixtures)
from tests.faults.harness import FIGURES, FULL

COLUMNS = [
    "scenario",
    "scale",
    "events",
    "kills",
    "restarts",
    "lost",
    "duplicate_runs",
    "dlq",
    "dlq_expected",
    "runs",
    "seconds",
    "other",
]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES or not (FULL or os.environ.get("FAULTS_REPORT")):
        return
    rows = [
        [str(f.get(c, "")) for c in COLUMNS[:-1]]
        + [" ".join(f"{k}={v}" for k, v in f.items() if k not in COLUMNS)]
        for f in FIGURES
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    tr = terminalreporter
    tr.write_sep("=", "fault-injection figures")
    tr.write_line("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)))
    for r in rows:
        tr.write_line("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
