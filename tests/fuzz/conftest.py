"""The fuzzer's fixture and its report.

``scenario`` is the fault suite's :class:`tests.faults.harness.Scenario` (the fuzzer
drives the same real processes through the same harness): it stops every process at
the end and prints their logs when the test failed. The report (records tried per
kind, outcomes, violations) is printed at the end of the session, pass or fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import Scenario
from tests.fuzz.invariant import REPORT


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fuzz: property-based fuzzing of the real pipeline (tests/fuzz, make fuzz)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"fuzz_report_{report.when}", report)
    return report


@pytest.fixture
async def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Scenario]:
    sc = Scenario(tmp_path)
    yield sc
    await sc.close()
    call = getattr(request.node, "fuzz_report_call", None)
    if call is None or call.failed:
        print(f"===== process logs of {request.node.name} (all of them: {tmp_path}) =====")
        print(sc.logs())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    terminalreporter.write_sep("=", "pipeline fuzz report")
    for line in REPORT:
        terminalreporter.write_line(line)
