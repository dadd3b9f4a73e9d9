"""pipeline.retry: the one capped backoff of the service loops, and the registry of
loops failing right now that ``/readyz`` answers from."""

from __future__ import annotations

from itertools import islice, pairwise

import pytest

from pipeline import retry
from pipeline.retry import (
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    RETRYING,
    Retrying,
    ShutdownRequested,
    backoff,
    until_done,
)


def test_backoff_doubles_from_initial_up_to_the_cap() -> None:
    assert list(islice(backoff(), 8)) == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert (BACKOFF_INITIAL, BACKOFF_MAX) == (0.2, 5.0)


def test_backoff_takes_its_own_bounds() -> None:
    assert list(islice(backoff(0.1, 0.3), 4)) == [0.1, 0.2, 0.3, 0.3]


def test_a_failing_loop_makes_the_process_not_ready_until_it_ends() -> None:
    registry = Retrying()
    assert registry.why_not_ready() is None
    with registry.loop("ledger lookup") as failed:
        assert registry.why_not_ready() is None  # entered, not failed yet
        failed(TimeoutError("half-open"))
        failed(ConnectionResetError("reset"))  # the last error, the first failure's age
        assert registry.oldest_age() > 0  # pipeline_dependency_failing_seconds
        why = registry.why_not_ready()
        assert why is not None
        assert why.startswith("ledger lookup retrying for 0s")
        assert "ConnectionResetError: reset" in why
        with registry.loop("start of a run") as other:
            other(OSError("refused"))
            assert registry.why_not_ready().endswith(" and 1 more")  # type: ignore[union-attr]
        assert not registry.why_not_ready().endswith("more")  # type: ignore[union-attr]
    assert registry.why_not_ready() is None
    assert registry.oldest_age() == 0


def test_a_loop_that_raises_is_cleared_too() -> None:
    registry = Retrying()
    with pytest.raises(RuntimeError), registry.loop("produce") as failed:
        failed(TimeoutError())
        raise RuntimeError("gave up")
    assert registry.why_not_ready() is None


def test_explicit_keys_clear_what_they_failed() -> None:
    registry, relay = Retrying(), object()
    registry.failed(relay, "relay term", OSError("gone"))
    assert "relay term" in (registry.why_not_ready() or "")
    registry.cleared(relay)
    registry.cleared(relay)  # twice is fine
    assert registry.why_not_ready() is None


def test_a_loop_whose_call_hangs_counts_after_the_stuck_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query on a half-open link has not failed yet: after STUCK_SECONDS in one loop
    the process is not ready all the same, and the age counts from the loop's start."""
    from pipeline import retry

    now = [1000.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    registry = Retrying()
    with registry.loop("ledger lookup"):
        now[0] += retry.STUCK_SECONDS - 1
        assert registry.why_not_ready() is None
        now[0] += 2
        assert registry.why_not_ready() == (
            f"ledger lookup retrying for {retry.STUCK_SECONDS + 1:.0f}s (no answer for 11s)"
        )
        assert registry.oldest_age() == retry.STUCK_SECONDS + 1
    assert registry.why_not_ready() is None


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """pipeline.retry's monotonic clock, which only a test moves (``clock[0] += s``)."""
    now = [1000.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> list[float]:
    """until_done's waits, recorded instead of slept (the clock moves by each)."""
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)
        clock[0] += delay

    monkeypatch.setattr(retry.asyncio, "sleep", sleep)
    return waits


async def test_until_done_retries_what_is_retriable_and_is_not_ready_meanwhile(
    no_sleep: list[float],
) -> None:
    calls: list[str | None] = []

    async def flaky() -> str:
        calls.append(RETRYING.why_not_ready())
        if len(calls) < 3:
            raise TimeoutError("half-open")
        return "done"

    got = await until_done("ledger lookup", flaky, retriable=lambda e: True, stopping=lambda: False)
    assert got == "done"
    assert no_sleep == [0.2, 0.4]  # the service loops' backoff
    assert calls[0] is None  # not failing before the first failure
    assert calls[2] is not None and calls[2].startswith("ledger lookup retrying")
    assert RETRYING.why_not_ready() is None  # cleared with the success


async def test_until_done_raises_what_is_not_retriable_at_once(no_sleep: list[float]) -> None:
    async def refused() -> None:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        await until_done("flow order", refused, retriable=lambda e: False, stopping=lambda: False)
    assert no_sleep == []
    assert RETRYING.why_not_ready() is None


async def test_until_done_stops_retrying_once_the_process_stops(no_sleep: list[float]) -> None:
    async def down() -> None:
        raise ConnectionResetError("reset")

    with pytest.raises(ShutdownRequested, match="window signal"):
        await until_done("window signal", down, retriable=lambda e: True, stopping=lambda: True)
    assert no_sleep == []
    assert RETRYING.why_not_ready() is None


def test_jittered_delays_stay_within_half_and_one_and_a_half_of_each_and_differ() -> None:
    from pipeline.retry import backoff, jittered

    base = [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    got = [d for d, _ in zip(jittered(backoff()), base, strict=False)]
    assert all(0.5 * b <= d < 1.5 * b for d, b in zip(got, base, strict=True))
    again = [d for d, _ in zip(jittered(backoff()), base, strict=False)]
    assert got != again  # random: two routers failing together do not retry in step


async def test_until_done_names_the_subject_and_waits_the_delays_given(
    no_sleep: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    attempts = iter([RuntimeError("down"), RuntimeError("down"), None])

    async def flaky() -> str:
        if (exc := next(attempts)) is not None:
            raise exc
        return "ok"

    got = await until_done(
        "start of a run",
        flaky,
        retriable=lambda e: True,
        stopping=lambda: False,
        delays=iter([1.0, 2.0]),
        subject="start of activity-a:e1",
    )
    assert got == "ok" and no_sleep == [1.0, 2.0]
    assert "start of activity-a:e1 failed (down), retrying in 1.0s" in caplog.text


async def test_a_delay_spaces_the_starts_of_attempts_so_a_hung_one_is_retried_at_once(
    no_sleep: list[float], clock: list[float]
) -> None:
    """A statement on a half-open link fails only after its bound; the link healing is
    what ends it. The delay counts from the attempt's start: after an attempt that took
    4 s of a 5-s delay the loop waits 1 s, after one that took 12 s it does not wait."""
    took = iter([4.0, 12.0, 0.0, 0.0])
    starts: list[float] = []

    async def half_open() -> str:
        starts.append(clock[0])
        clock[0] += next(took)
        if len(starts) < 4:
            raise TimeoutError("half-open")
        return "healed"

    got = await until_done(
        "ledger lookup",
        half_open,
        retriable=lambda e: True,
        stopping=lambda: False,
        delays=iter([5.0, 5.0, 5.0]),
    )
    assert got == "healed"
    assert no_sleep == [1.0, 0.0, 5.0]
    # never two starts closer than the delay: a fast-failing dependency sees the same rate
    assert [b - a for a, b in pairwise(starts)] == [5.0, 12.0, 5.0]


def test_since_began_is_what_is_left_of_the_delay() -> None:
    assert retry.since_began(5.0, 0.0) == 5.0
    assert retry.since_began(5.0, 3.5) == 1.5
    assert retry.since_began(5.0, 10.0) == 0.0
