"""Nominal times: cron in a time zone (DST included), epoch-aligned intervals, gaps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler import timing
from schemas.definitions import CronTrigger


def cron(expr: str, tz: str = "UTC", **kw: object) -> CronTrigger:
    return CronTrigger(type="cron", cron=expr, timezone=tz, **kw)  # type: ignore[arg-type]


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_floor_previous_following_in_a_zone_across_dst() -> None:
    t = cron("0 9 * * *", "Europe/Paris")  # 09:00 Paris: 08:00 UTC in winter, 07:00 in summer
    assert timing.floor(t, utc(2026, 3, 28, 12)) == utc(2026, 3, 28, 8)
    assert timing.following(t, utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 7)  # DST starts
    assert timing.previous(t, utc(2026, 3, 29, 7)) == utc(2026, 3, 28, 8)
    assert timing.floor(t, utc(2026, 3, 28, 8)) == utc(2026, 3, 28, 8)  # a nominal time itself


def test_intervals_are_epoch_aligned() -> None:
    t = cron("* * * * *", interval_seconds=5)
    assert timing.floor(t, utc(2026, 1, 1, 0, 0, 7)) == utc(2026, 1, 1, 0, 0, 5)
    assert timing.previous(t, utc(2026, 1, 1, 0, 0, 5)) == utc(2026, 1, 1, 0, 0, 0)
    assert timing.following(t, utc(2026, 1, 1, 0, 0, 5)) == utc(2026, 1, 1, 0, 0, 10)


@pytest.mark.parametrize("trigger", [cron("*/5 * * * *"), cron("* * * * *", interval_seconds=300)])
def test_between_is_open_and_keeps_the_latest(trigger: CronTrigger) -> None:
    start, end = utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 1, 0)
    times, total = timing.between(trigger, start, end)
    assert total == 11 and times[0] == utc(2026, 1, 1, 0, 5) and times[-1] == utc(2026, 1, 1, 0, 55)
    latest, total = timing.between(trigger, start, end, limit=3)
    assert total == 11
    assert latest == [utc(2026, 1, 1, 0, 45), utc(2026, 1, 1, 0, 50), utc(2026, 1, 1, 0, 55)]
    assert timing.between(trigger, start, start + timedelta(minutes=5)) == ([], 0)


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        timing.floor(cron("* * * * *"), datetime(2026, 1, 1))
