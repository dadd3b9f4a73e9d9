"""Fault-injection scenarios: the ``fault`` fixture, and the figures table.

``fault`` yields a :class:`tests.faults.harness.Scenario`: the scenario spawns its
pipeline through it and records its figures row; at the end every process is
stopped, cleanups run, and when the test failed the process logs are printed.

``FAULTS_SCALE=full`` (``make faults``) prints, per scenario: events, kills,
restarts, lost (must be 0), duplicate runs (must be 0), DLQ'd and the DLQ count
expected. ``FAULTS_REPORT=1`` prints it at the reduced size too. Rows are
recorded before the asserts, so a failing run shows its real figures.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.cluster import cluster_topics, kafka_cluster  # noqa: F401  (fixtures)
from tests.faults.harness import FIGURES, FULL, Scenario

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
async def fault(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Scenario]:
    scenario = Scenario(tmp_path)
    yield scenario
    await scenario.close()
    call = getattr(request.node, "report_call", None)
    if call is None or call.failed:
        print(f"===== process logs of {request.node.name} =====")
        print(scenario.logs())


def figures_table() -> list[str]:
    rows = [
        [str(f.get(c, "")) for c in COLUMNS[:-1]]
        + [" ".join(f"{k}={v}" for k, v in f.items() if k not in COLUMNS)]
        for f in FIGURES
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    out = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return out


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES or not (FULL or os.environ.get("FAULTS_REPORT")):
        return
    terminalreporter.write_sep("=", "fault-injection figures")
    for line in figures_table():
        terminalreporter.write_line(line)
