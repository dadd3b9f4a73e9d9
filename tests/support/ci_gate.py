"""Under ``CI=true`` a skipped test fails: a CI run must run every test it collects.

A test that cannot run on a developer's machine (no kubectl, no promtool with
Kubernetes discovery) may skip there, saying why and how to install it; in CI,
where ``make system-deps`` installs what the suite needs, the same skip would
hide a test that never ran, so it is reported as a failure with its reason.
``pytest -rs`` (pyproject's ``addopts``) prints every skip reason elsewhere.

Registered by ``tests/conftest.py``; ``tests/unit/test_gates.py`` proves it.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, where every collected test must run: {reason}"
