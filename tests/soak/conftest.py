"""The soak's fixtures: the private 3-broker cluster, its topics, and ``fault``.

``kafka_cluster`` and ``cluster_topics`` are the failover scenarios' own
(``tests/faults/cluster.py``), and ``fault`` the fault suite's: a ``tests.faults.harness.Scenario``:
the pipeline's processes and the private servers' cleanups, all stopped at the end,
with the process logs printed when the test failed. The figures table of the run is
printed at the end of the session (``tests.soak.report.TABLE``), also when it failed.
"""

from __future__ import annotations

from typing import Any

from tests.faults.cluster import cluster_topics, kafka_cluster  # noqa: F401  (fixtures)

# The fault suite's scenario fixture (its processes' logs printed when a test fails) and the
# hook it reads the outcome from.
from tests.faults.conftest import fault, pytest_runtest_makereport  # noqa: F401
from tests.soak.report import TABLE


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    terminalreporter.write_sep("=", "soak figures")
    for line in TABLE:
        terminalreporter.write_line(line)
