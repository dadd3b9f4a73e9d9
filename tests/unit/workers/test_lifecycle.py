"""flow.timeouts' deadlines (workers/lifecycle.next_deadline): pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.workflow_io import RunTimeouts
from workers.lifecycle import TIMEOUT_FINISH, TIMEOUT_START, next_deadline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_start_then_finish_from_the_run_s_creation() -> None:
    t = RunTimeouts(start=10, finish=60)
    assert next_deadline(t, T0, False, False, None) == (T0 + timedelta(seconds=10), TIMEOUT_START)
    # The first task started: only finish is left.
    assert next_deadline(t, T0, True, False, None) == (T0 + timedelta(seconds=60), TIMEOUT_FINISH)


def test_a_held_run_has_no_start_deadline_and_a_resumed_one_counts_from_its_resume() -> None:
    t = RunTimeouts(start=10)
    assert next_deadline(t, T0, False, True, None) is None
    resumed = T0 + timedelta(hours=1)
    assert next_deadline(t, T0, False, False, resumed) == (
        resumed + timedelta(seconds=10),
        TIMEOUT_START,
    )


def test_no_deadline_once_started_without_finish() -> None:
    assert next_deadline(RunTimeouts(start=5), T0, True, False, None) is None
