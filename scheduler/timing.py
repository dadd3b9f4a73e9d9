"""Nominal times of a cron trigger, computed locally (croniter, or epoch-aligned intervals).

Why locally rather than asking Temporal (``ListScheduleMatchingTimes``): the
dispatcher needs "the nominal time before T" and "the times between two
instants" for gaps of any length, and the server caps that call's answer.
The trigger stored in ``activities`` is what the schedule spec is built from
(:mod:`scheduler.spec`), so both agree. All results are UTC, whole seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from schemas.definitions import CronTrigger

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise ValueError("naive datetime: its zone would be a guess")
    return t.astimezone(UTC).replace(microsecond=0)


def _step(trigger: CronTrigger) -> timedelta | None:
    return timedelta(seconds=trigger.interval_seconds) if trigger.interval_seconds else None


def floor(trigger: CronTrigger, t: datetime) -> datetime:
    """The latest nominal time <= ``t`` (``t`` itself when it is one)."""
    t = _utc(t)
    step = _step(trigger)
    if step is not None:
        return _EPOCH + ((t - _EPOCH) // step) * step
    local = t.astimezone(ZoneInfo(trigger.timezone)) + timedelta(seconds=1)
    prev: datetime = croniter(trigger.cron, local).get_prev(datetime)
    return _utc(prev)


def previous(trigger: CronTrigger, t: datetime) -> datetime:
    """The latest nominal time strictly before ``t``."""
    return floor(trigger, _utc(t) - timedelta(seconds=1))


def following(trigger: CronTrigger, t: datetime) -> datetime:
    """The earliest nominal time strictly after ``t``."""
    t = _utc(t)
    step = _step(trigger)
    if step is not None:
        return floor(trigger, t) + step
    nxt: datetime = croniter(trigger.cron, t.astimezone(ZoneInfo(trigger.timezone))).get_next(
        datetime
    )
    return _utc(nxt)


def between(
    trigger: CronTrigger, after: datetime, before: datetime, limit: int = 100_000
) -> tuple[list[datetime], int]:
    """Nominal times in the open interval (after, before): (the latest ``limit``, total count).

    Keeping the latest when the gap is huge is what every caller wants: catch-up
    replays the latest, compress and skip only need the count.
    """
    after, before = _utc(after), _utc(before)
    step = _step(trigger)
    if step is not None:
        first = following(trigger, after)
        if first >= before:
            return [], 0
        total = (before - first - timedelta(seconds=1)) // step + 1
        keep = min(total, limit)
        start = first + (total - keep) * step
        return [start + i * step for i in range(keep)], total
    out: list[datetime] = []
    total = 0
    t = following(trigger, after)
    while t < before:
        total += 1
        out.append(t)
        if len(out) > limit:
            out.pop(0)
        t = following(trigger, t)
    return out, total
