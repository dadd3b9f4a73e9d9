"""The ordered fault scenarios' count of a task that left its handler twice
(``tests/faults/ordered.py``): a second completion is Temporal's retry only when the
first one's worker was killed before it could report it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.faults.ordered import _report_lost

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def visit(worker: str, attempt: int, exited: float | None) -> dict[str, Any]:
    return {
        "worker": worker,
        "attempt": attempt,
        "exited_at": None if exited is None else T0 + timedelta(seconds=exited),
    }


def test_a_completion_its_killed_worker_never_reported_is_a_retry() -> None:
    first, retry = visit("w0", 1, 0.0), visit("w1", 2, 5.0)
    assert _report_lost(first, [first, retry], {"w0": T0 + timedelta(seconds=0.01)})


def test_a_worker_that_outlived_its_completion_reported_it() -> None:
    first, again = visit("w0", 1, 0.0), visit("w1", 2, 9.0)
    assert not _report_lost(first, [first, again], {"w0": T0 + timedelta(seconds=3)})


def test_a_completion_of_a_worker_never_killed_is_not_lost() -> None:
    first, again = visit("w0", 1, 0.0), visit("w0", 2, 1.0)
    assert not _report_lost(first, [first, again], {})


def test_without_a_later_attempt_a_second_completion_is_a_second_run() -> None:
    first, again = visit("w0", 1, 0.0), visit("w1", 1, 1.0)
    assert not _report_lost(first, [first, again], {"w0": T0 + timedelta(seconds=0.01)})


def test_a_kill_before_the_exit_did_not_lose_it() -> None:
    first, retry = visit("w0", 1, 0.0), visit("w1", 2, 5.0)
    assert not _report_lost(first, [first, retry], {"w0": T0 - timedelta(seconds=0.5)})
