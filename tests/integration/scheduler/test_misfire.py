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
from tests.helpers import eventually, metric_value

from .conftest import cron_runs, nominal_times

S = timedelta(seconds=5)
EVERY = {"cron": "* * * * *", "interval_seconds": 5}


async def _wait_until(t: datetime) -> None:
    await asyncio.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


async def _pause(temporal, db_pool, act) -> datetime:
    """Pause after two runs; returns L, the last nominal time the schedule fired."""

    async def two_runs() -> bool:
        return len(await cron_runs(db_pool, act.id)) >= 2

    await eventually(two_runs, 30, "two cron runs before the pause")
    await sync.pause(temporal, str(act.id))
    await asyncio.sleep(1.0)  # a fire the pause did not beat shows up in recent_actions
    desc = await temporal.get_schedule_handle(schedule_id(act.id)).describe()
    last = max(a.scheduled_at for a in desc.info.recent_actions)
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
        before = {p: metric_value("pipeline_misfires_total", policy=p)
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
        await asyncio.sleep(1.5)  # a wrong extra replay would show up now

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
