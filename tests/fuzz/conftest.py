"""The fuzzer's fixture and its report.

``fault`` is the fault suite's own fixture (tests/faults/conftest.py), imported with its
report hook: the fuzzer drives the same real processes through the same harness, which
stops every process at the end and prints their logs when the test failed. The report
(records tried per kind, outcomes, violations) is printed at the end of the session,
pass or fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.conftest import fault, pytest_runtest_makereport  # noqa: F401
from tests.fuzz.invariant import REPORT


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fuzz: property-based fuzzing of the real pipeline (tests/fuzz, make fuzz)"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    terminalreporter.write_sep("=", "pipeline fuzz report")
    for line in REPORT:
        terminalreporter.write_line(line)
