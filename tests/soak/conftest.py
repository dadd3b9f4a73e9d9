"""The soak's fixtures: the private 3-broker cluster, its topics, and ``soak``.

``kafka_cluster`` and ``cluster_topics`` are the failover scenarios' own
(``tests/faults/cluster.py``). ``soak`` yields a ``tests.faults.harness.Scenario``:
the pipeline's processes and the private servers' cleanups, all stopped at the end,
with the process logs printed when the test failed. The figures table of the run is
printed at the end of the session (``tests.soak.report.TABLE``), also when it failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.cluster import cluster_topics, kafka_cluster  # noqa: F401  (fixtures)
from tests.faults.harness import Scenario
from tests.soak.report import TABLE


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
async def soak(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Scenario]:
    scenario = Scenario(tmp_path)
    yield scenario
    await scenario.close()
    call = getattr(request.node, "report_call", None)
    if call is None or call.failed:
        print(f"===== process logs of {request.node.name} =====")
        print(scenario.logs())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    terminalreporter.write_sep("=", "soak figures")
    for line in TABLE:
        terminalreporter.write_line(line)
