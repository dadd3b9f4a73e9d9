"""Duplicate fires of one nominal time produce exactly one run (manual trigger, backfill),
and dedupe_key_strategy never suppresses fires of different nominal times."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import orjson
from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy

from scheduler import sync
from schemas.ids import cron_workflow_id, run_id_for, schedule_id
from schemas.workflow_io import RUN_ACTIVITY_WORKFLOW, RunActivityInput
from tests.support.db import cron_runs, nominal_times
from tests.support.metrics import metric_value
from tests.support.wait import eventually, quiet

HOUR = timedelta(hours=1)


def _hours_of_yesterday() -> tuple[dict[str, str], datetime]:
    """A trigger with hourly nominal times that the clock cannot move during a test, and
    the latest of them, ``H``.

    The trigger fires at 01:00, 02:00 and 03:00 UTC on yesterday's date, once a year:
    ``H`` (yesterday 03:00) stays the latest nominal time for a year, so a manual
    trigger, which snaps to the latest nominal time, always fires ``H``, whenever the
    test runs and however slowly (an hourly cron's current hour can end mid-test).
    Policy catchup (overlap ALLOW_ALL) so that Temporal passes every trigger on to the
    dispatcher: under SKIP a trigger while the previous dispatcher still runs is
    dropped by Temporal itself, and the contract-id suppression would not be exercised.
    """
    day = datetime.now(UTC).date() - timedelta(days=1)
    hour = datetime(day.year, day.month, day.day, 3, tzinfo=UTC)
    return {"cron": f"0 1,2,3 {day.day} {day.month} *", "misfire_policy": "catchup"}, hour


def _dupes(layer: str, missing_ok: bool = False) -> float:
    return metric_value(
        "pipeline_duplicates_suppressed_total",
        missing_ok=missing_ok,
        component="scheduler",
        trigger="cron",
        layer=layer,
    )


async def test_trigger_and_backfill_of_a_time_that_ran_start_nothing_twice(
    temporal, db_pool, cfg, activities, cron_worker
):
    trigger, hour = _hours_of_yesterday()
    act = await activities(trigger)
    async with cron_worker():
        await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
        await sync.pause(temporal, str(act.id))  # only our own fires from here on
        handle = temporal.get_schedule_handle(schedule_id(act.id))
        ledger, tempo = _dupes("ledger", True), _dupes("temporal", True)

        await handle.trigger()  # fires "now": snaps to H, the latest nominal time

        async def ran_hour() -> bool:
            return hour in await nominal_times(db_pool, act.id)

        await eventually(ran_hour, 90, "the triggered run of the latest nominal time")
        await handle.trigger()  # the same nominal hour again: activity_runs has it

        async def ledger_dupe() -> bool:
            return _dupes("ledger", True) >= ledger + 1

        await eventually(ledger_dupe, 90, "the second trigger to be suppressed")
        # H-2h: a run Temporal started but no worker has logged yet (its queue is
        # not polled), so only Temporal's REJECT_DUPLICATE can stop the backfill.
        queued = cron_workflow_id(act.id, hour - 2 * HOUR)
        await temporal.start_workflow(
            RUN_ACTIVITY_WORKFLOW,
            RunActivityInput(str(act.id), queued, str(run_id_for(queued)), "cron",
                             scheduled_for=(hour - 2 * HOUR).isoformat()),
            id=queued, task_queue=f"unpolled-{uuid.uuid4()}",
        )  # fmt: skip
        # Backfill H-2h (queued), H-1h (new) and H (already ran).
        await handle.backfill(
            ScheduleBackfill(hour - 2 * HOUR - timedelta(seconds=1),
                             hour + timedelta(seconds=1), ScheduleOverlapPolicy.ALLOW_ALL)
        )  # fmt: skip

        async def backfilled() -> bool:
            return (
                hour - HOUR in await nominal_times(db_pool, act.id)
                and _dupes("ledger", True) >= ledger + 2
                and _dupes("temporal", True) >= tempo + 1
            )

        await eventually(backfilled, 90, "the backfill: 1 new run, 2 suppressed")

        async def state() -> tuple[object, ...]:
            times = await nominal_times(db_pool, act.id)
            return (tuple(times), _dupes("ledger"), _dupes("temporal"))

        # An extra run or suppression would show up late: wait for a quiet period.
        await quiet(state, "the cron runs and duplicate counters", period=2.0, timeout=30)
        await temporal.get_workflow_handle(queued).terminate("test over")
    runs = await cron_runs(db_pool, act.id)
    assert [r["scheduled_for"] for r in runs] == [hour - HOUR, hour]
    assert (_dupes("ledger"), _dupes("temporal")) == (ledger + 2, tempo + 1)
    for r in runs:  # every run covers its own interval
        assert r["context_window_end"] - r["context_window_start"] == HOUR
        assert r["workflow_id"] == f"activity-{act.id}:{r['scheduled_for'].isoformat()}"


async def test_dedupe_key_strategy_skip_does_not_suppress_equal_content(
    temporal, db_pool, cfg, activities, cron_worker
):
    trigger, hour = _hours_of_yesterday()
    act = await activities(
        trigger,
        dedupe_key_strategy="skip",
        tasks=[{"type": "noop", "payload": {"report": "same content every time"}}],
    )
    async with cron_worker():
        await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
        await sync.pause(temporal, str(act.id))
        first, second = hour - 2 * HOUR, hour - HOUR
        await temporal.get_schedule_handle(schedule_id(act.id)).backfill(
            ScheduleBackfill(first - timedelta(seconds=1), second + timedelta(seconds=1),
                             ScheduleOverlapPolicy.ALLOW_ALL)
        )  # fmt: skip

        async def both_done() -> bool:
            runs = await cron_runs(db_pool, act.id)
            return len(runs) == 2 and all(r["status"] == "succeeded" for r in runs)

        await eventually(both_done, 90, "two runs of equal content")
    runs = await cron_runs(db_pool, act.id)
    assert [r["scheduled_for"] for r in runs] == [first, second]
    tasks = await db_pool.fetch(
        "SELECT status, payload FROM task_instances WHERE run_id = ANY($1::uuid[])",
        [r["run_id"] for r in runs],
    )
    assert [t["status"] for t in tasks] == ["succeeded", "succeeded"]
    contents = [orjson.loads(t["payload"])["report"] for t in tasks]
    assert contents == ["same content every time"] * 2, "equal content, both ran"
    stored = await db_pool.fetchval(
        "SELECT dedupe_key_strategy FROM activities WHERE id = $1", act.id
    )
    assert stored == "skip"
