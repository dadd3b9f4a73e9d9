"""Pause a 10-second schedule across 3 nominal times, resume, and check each misfire policy.

The four scenarios run concurrently on one worker to keep the suite short; each
has its own activity, schedule and timing. 10 s rather than 2 s: the dev server is
shared with other suites; on a loaded machine a schedule start can take seconds, and
a dispatcher that starts more than an interval late is not a regular fire.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

from scheduler import sync
from schemas.ids import schedule_id
from tests.support.db import cron_runs, nominal_times
from tests.support.metrics import metric_value
from tests.support.wait import eventually, quiet

S = timedelta(seconds=10)
EVERY = {"cron": "* * * * *", "interval_seconds": 10}


async def _wait_until(t: datetime) -> None:
    await asyncio.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


async def _pause(temporal, db_pool, act) -> datetime:
    """Pause after two runs; returns L, the last nominal time the schedule fired."""

    async def two_runs() -> bool:
        return len(await cron_runs(db_pool, act.id)) >= 2

    await eventually(two_runs, 60, "two cron runs before the pause")
    await sync.pause(temporal, str(act.id))
    handle = temporal.get_schedule_handle(schedule_id(act.id))

    async def newest_action() -> datetime:
        desc = await handle.describe()
        return max(a.scheduled_at for a in desc.info.recent_actions)

    # A fire the pause did not beat shows up in recent_actions: wait until it is stable.
    last = await quiet(
        newest_action, "the schedule's newest action", period=0.5, timeout=15, interval=0.1
    )
    desc = await handle.describe()
    assert desc.schedule.state.paused
    return last


async def _resume(temporal, db_pool, act, last: datetime) -> list[int]:
    """Resume just after L+3S, so L+1S..L+3S are missed and L+4S is the first fire after it.

    A loaded machine may resume later than planned; then more times are missed and
    the first fire after the resume is a later grid time. Rather than fail as "too
    slow", return the candidates k (L+kS the first fire after the unpause, which
    happened between the clock readings around the call): one k, or two when a
    nominal time passed while ``resume`` ran. The checks below hold for the k that
    the data matches, and fail when it matches none.
    """
    await _wait_until(last + 3 * S + timedelta(seconds=0.8))
    before = datetime.now(UTC)
    said = await sync.resume(temporal, db_pool, str(act.id))
    after = datetime.now(UTC)
    ks = list(range(math.floor((before - last) / S) + 1, math.floor((after - last) / S) + 2))
    assert ks[0] >= 4, f"resumed before L+3S: {before} vs L={last}"
    assert any(f"{k - 1} nominal time(s) missed" in said for k in ks), (said, ks)
    return ks


def _expected(policy: str, k: int) -> set[int]:
    """Which of L+0S..L+kS run when L+kS is the first fire after the resume."""
    return {
        "skip": {0, k},  # the k-1 missed are discarded
        "catchup": set(range(k + 1)),  # all k-1 missed are replayed (limit 10)
        "catchup2": {0, k - 2, k - 1, k},  # catchup_limit=2: the latest 2 missed
        "compress": {0, k},  # no replay; one run's window spans them
    }[policy]


async def test_pause_resume_per_misfire_policy(temporal, db_pool, cfg, activities, cron_worker):
    skip = await activities({**EVERY, "misfire_policy": "skip"})
    catchup = await activities({**EVERY, "misfire_policy": "catchup"})
    catchup2 = await activities({**EVERY, "misfire_policy": "catchup", "catchup_limit": 2})
    compress = await activities({**EVERY, "misfire_policy": "compress"})
    acts = [skip, catchup, catchup2, compress]
    policy = {skip.id: "skip", catchup.id: "catchup", catchup2.id: "catchup2"}
    policy[compress.id] = "compress"
    async with cron_worker():
        changes = await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
        assert sorted(c.action for c in changes) == ["created"] * 4
        lasts = await asyncio.gather(*(_pause(temporal, db_pool, a) for a in acts))
        L = {a.id: last for a, last in zip(acts, lasts, strict=True)}
        before = {p: metric_value("pipeline_misfires_total", missing_ok=True, policy=p)
                  for p in ("skip", "catchup", "compress")}  # fmt: skip
        candidates = await asyncio.gather(*(_resume(temporal, db_pool, a, L[a.id]) for a in acts))
        KS = {a.id: ks for a, ks in zip(acts, candidates, strict=True)}

        def ran(aid, k: int, got: list[datetime]) -> set[int]:
            """Which of L+0S..L+kS ran, as multiples of S."""
            return {i for i in range(k + 1) if L[aid] + i * S in got}

        async def settled() -> bool:
            for aid, ks in KS.items():
                got = await nominal_times(db_pool, aid)
                if not any(_expected(policy[aid], k) <= ran(aid, k, got) for k in ks):
                    return False
            return True

        await eventually(settled, 30, "the first fire after resume (and its replays)")

        async def all_times() -> list[list[datetime]]:
            return [await nominal_times(db_pool, a.id) for a in acts]

        # A wrong extra replay would show up late: wait for a quiet period with no new run.
        await quiet(all_times, "the cron runs", period=2.0, timeout=20)

    K: dict = {}
    for aid, ks in KS.items():
        got = await nominal_times(db_pool, aid)
        match = [k for k in ks if ran(aid, k, got) == _expected(policy[aid], k)]
        assert match, f"{policy[aid]}: ran {sorted(ran(aid, ks[-1], got))} of 0..{ks[-1]} x S"
        K[aid] = match[0]
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, compress.id)}
    run = by_time[L[compress.id] + K[compress.id] * S]
    assert (run["context_window_start"], run["context_window_end"]) == (
        L[compress.id],
        L[compress.id] + K[compress.id] * S,
    ), "one run whose window spans the missed intervals and the current one"
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, skip.id)}
    normal = by_time[L[skip.id] + K[skip.id] * S]
    assert normal["context_window_start"] == L[skip.id] + (K[skip.id] - 1) * S, (
        "skip keeps a one-interval window"
    )
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, catchup.id)}
    replayed = by_time[L[catchup.id] + S]
    assert (replayed["context_window_start"], replayed["context_window_end"]) == (
        L[catchup.id],
        L[catchup.id] + S,
    ), "a replayed run covers its own interval"
    missed = {aid: k - 1 for aid, k in K.items()}
    assert (
        metric_value("pipeline_misfires_total", policy="skip") - before["skip"] == missed[skip.id]
    )
    assert (
        metric_value("pipeline_misfires_total", policy="catchup") - before["catchup"]
        == missed[catchup.id] + missed[catchup2.id]
    )
    assert (
        metric_value("pipeline_misfires_total", policy="compress") - before["compress"]
        == missed[compress.id]
    )


HOUR = timedelta(hours=1)
HOURLY = {"cron": "0 * * * *"}


async def _ran_long_ago(db_pool, act, hours: int) -> datetime:
    """Pretend the activity last ran ``hours`` nominal hours ago (an activity_runs row)."""
    from schemas.ids import cron_workflow_id, run_id_for

    last = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - hours * HOUR
    wid = cron_workflow_id(act.id, last)
    await db_pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, scheduled_for,"
        " context_window_start, context_window_end, status)"
        " VALUES ($1, $2, $3, 'cron', $4, $5, $4, 'succeeded')",
        run_id_for(wid), act.id, wid, last, last - HOUR,
    )  # fmt: skip
    return last


async def test_resume_now_applies_the_policy_at_once(
    temporal, db_pool, cfg, activities, cron_worker
):
    """An hourly cron paused for hours: ``resume --now`` catches up within seconds,
    not at the next hour; the next regular fire then sees no gap left."""
    from scheduler import timing
    from scheduler.dispatcher import CronActivities

    catchup = await activities({**HOURLY, "misfire_policy": "catchup", "catchup_limit": 3})
    compress = await activities({**HOURLY, "misfire_policy": "compress"})
    skip = await activities({**HOURLY, "misfire_policy": "skip"})
    acts = [catchup, compress, skip]
    last = {a.id: await _ran_long_ago(db_pool, a, 5) for a in acts}
    async with cron_worker():
        await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
        for a in acts:
            await sync.pause(temporal, str(a.id))
        before = {p: metric_value("pipeline_misfires_total", missing_ok=True, policy=p)
                  for p in ("skip", "catchup", "compress")}  # fmt: skip
        said = {
            a.id: await sync.resume(
                temporal, db_pool, str(a.id), now=True, task_queue=cfg.temporal.task_queue
            )
            for a in acts
        }
        # M: the newest nominal time at or before the resume (it was missed too).
        M = {a.id: timing.floor(a.trigger, datetime.now(UTC)) for a in acts}
        gap = {a.id: int((M[a.id] - last[a.id]) / HOUR) for a in acts}  # 5, or 6 past the hour

        async def caught_up() -> bool:
            c = await nominal_times(db_pool, catchup.id)
            k = await nominal_times(db_pool, compress.id)
            return len(c) == 1 + 3 and len(k) == 1 + 1

        await eventually(caught_up, 60, "the runs the policies start at resume")

        async def all_times() -> list[list[datetime]]:
            return [await nominal_times(db_pool, a.id) for a in acts]

        # A wrong extra run would show up late: wait for a quiet period with no new run.
        await quiet(all_times, "the cron runs", period=2.0, timeout=30)
        dispatcher = CronActivities(temporal, db_pool, cfg.temporal.task_queue)
        next_fire = {
            a.id: await dispatcher._decide(str(a.id), a.trigger, M[a.id] + HOUR) for a in acts
        }

    for a in acts:
        assert "applied now" in said[a.id], said[a.id]
    c, m = catchup.id, M[catchup.id]
    assert await nominal_times(db_pool, c) == [last[c], m - 2 * HOUR, m - HOUR, m], (
        "catchup_limit=3: the newest missed time and the 2 before it run now"
    )
    k, m = compress.id, M[compress.id]
    (_, run) = await cron_runs(db_pool, k)
    assert run["scheduled_for"] == m
    assert (run["context_window_start"], run["context_window_end"]) == (last[k], m), (
        "compress: one run whose window spans every missed interval"
    )
    assert await nominal_times(db_pool, skip.id) == [last[skip.id]], "skip: nothing runs"
    for a in acts:
        d = next_fire[a.id]
        assert (d.misfires, d.replay) == (0, []), f"{a.trigger.misfire_policy}: gap left {d}"
    for a in acts:
        p = a.trigger.misfire_policy
        assert metric_value("pipeline_misfires_total", policy=p) - before[p] == gap[a.id], p
