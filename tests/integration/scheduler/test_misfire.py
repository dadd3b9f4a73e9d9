"""Pause a 5-second schedule across 3 nominal times, resume, and check each misfire policy.

The four scenarios run concurrently on one worker to keep the suite short; each
has its own activity, schedule and timing. 5 s rather than 2 s: the dev server
is shared with other suites, and a schedule start can take over a second.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from scheduler import sync
from schemas.ids import schedule_id
from tests.support.db import cron_runs, nominal_times
from tests.support.metrics import metric_value
from tests.support.wait import eventually, quiet

S = timedelta(seconds=5)
EVERY = {"cron": "* * * * *", "interval_seconds": 5}


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


async def _resume(temporal, db_pool, act, last: datetime) -> None:
    """Resume between L+3S and L+4S: L+1S..L+3S were missed, L+4S fires normally."""
    await _wait_until(last + 3 * S + timedelta(seconds=0.8))
    assert datetime.now(UTC) < last + 4 * S - timedelta(seconds=0.5), "too slow to test"
    said = await sync.resume(temporal, db_pool, str(act.id))
    assert "3 nominal time(s) missed" in said, said


async def test_pause_resume_per_misfire_policy(temporal, db_pool, cfg, activities, cron_worker):
    skip = await activities({**EVERY, "misfire_policy": "skip"})
    catchup = await activities({**EVERY, "misfire_policy": "catchup"})
    catchup2 = await activities({**EVERY, "misfire_policy": "catchup", "catchup_limit": 2})
    compress = await activities({**EVERY, "misfire_policy": "compress"})
    acts = [skip, catchup, catchup2, compress]
    async with cron_worker():
        changes = await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
        assert sorted(c.action for c in changes) == ["created"] * 4
        lasts = await asyncio.gather(*(_pause(temporal, db_pool, a) for a in acts))
        L = {a.id: last for a, last in zip(acts, lasts, strict=True)}
        before = {p: metric_value("pipeline_misfires_total", missing_ok=True, policy=p)
                  for p in ("skip", "catchup", "compress")}  # fmt: skip
        await asyncio.gather(*(_resume(temporal, db_pool, a, L[a.id]) for a in acts))
        want = {skip.id: [4], catchup.id: [1, 2, 3, 4], catchup2.id: [2, 3, 4], compress.id: [4]}

        async def settled() -> bool:
            for aid, ks in want.items():
                got = set(await nominal_times(db_pool, aid))
                if not all(L[aid] + k * S in got for k in ks):
                    return False
            return True

        await eventually(settled, 30, "the first fire after resume (and its replays)")

        async def all_times() -> list[list[datetime]]:
            return [await nominal_times(db_pool, a.id) for a in acts]

        # A wrong extra replay would show up late: wait for a quiet period with no new run.
        await quiet(all_times, "the cron runs", period=2.0, timeout=20)

    def times(aid) -> set[datetime]:
        """Nominal times that ran between L and L+4S inclusive."""
        return {t for t in nominal_times_cache[aid] if L[aid] <= t <= L[aid] + 4 * S}

    nominal_times_cache = {a.id: await nominal_times(db_pool, a.id) for a in acts}
    L0 = {aid: [L[aid] + k * S for k in range(5)] for aid in L}
    assert times(skip.id) == {L0[skip.id][0], L0[skip.id][4]}, "skip discards the 3 missed"
    assert times(catchup.id) == set(L0[catchup.id]), "catchup replays all 3 missed"
    assert times(catchup2.id) == {L0[catchup2.id][i] for i in (0, 2, 3, 4)}, (
        "catchup_limit=2 keeps the latest 2 missed and drops the earliest"
    )
    assert times(compress.id) == {L0[compress.id][0], L0[compress.id][4]}, "compress: no replay"
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, compress.id)}
    run = by_time[L[compress.id] + 4 * S]
    assert (run["context_window_start"], run["context_window_end"]) == (
        L[compress.id],
        L[compress.id] + 4 * S,
    ), "one run whose window spans the 3 missed intervals and the current one"
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, skip.id)}
    normal = by_time[L[skip.id] + 4 * S]
    assert normal["context_window_start"] == L[skip.id] + 3 * S, "skip keeps a one-interval window"
    by_time = {r["scheduled_for"]: r for r in await cron_runs(db_pool, catchup.id)}
    replayed = by_time[L[catchup.id] + S]
    assert (replayed["context_window_start"], replayed["context_window_end"]) == (
        L[catchup.id],
        L[catchup.id] + S,
    ), "a replayed run covers its own interval"
    assert metric_value("pipeline_misfires_total", policy="skip") - before["skip"] == 3
    assert metric_value("pipeline_misfires_total", policy="catchup") - before["catchup"] == 6
    assert metric_value("pipeline_misfires_total", policy="compress") - before["compress"] == 3


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
