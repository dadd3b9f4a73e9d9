"""``ingest activities pause|resume`` run as a user would, on the real Temporal and
PostgreSQL: a cron activity's schedule is paused and unpaused with it (the note tells
the pause apart from a disabled activity's and an operator's), the held runs of an
event activity start on resume, and `list` shows the pause and the held count."""

from __future__ import annotations

import asyncio

import orjson

from scheduler.spec import DISABLED_NOTE, PAUSED_NOTE
from scheduler.sync import reconcile
from schemas.ids import schedule_id
from tests.integration.scheduler.test_cli import ingest
from tests.support.runs import event_run, insert_activity, start_run
from tests.support.wait import eventually


async def test_pausing_a_cron_activity_pauses_its_schedule(cfg, temporal, db_pool, activities):
    act = await activities(trigger={"cron": "0 * * * *", "misfire_policy": "compress"})
    sid = schedule_id(act.id)
    queue = cfg.temporal.task_queue
    await reconcile(temporal, db_pool, queue)
    assert not (await temporal.get_schedule_handle(sid).describe()).schedule.state.paused

    _, out, _ = await ingest(cfg, "activities", "pause", act.name, "--reason", "db upgrade")
    assert f"paused activity {act.id} ({act.name})" in out and ": db upgrade;" in out, out
    assert f"schedule: paused      {sid}  (activity paused)" in out, out
    state = (await temporal.get_schedule_handle(sid).describe()).schedule.state
    assert state.paused and state.note == PAUSED_NOTE
    _, out, _ = await ingest(cfg, "activities", "pause", str(act.id), "--actor", "ann")
    assert "already paused" in out and "by cli:" in out and "schedule: no change" in out, out
    # A sync keeps the pause (it reads it from the activity), and says nothing to change.
    assert await reconcile(temporal, db_pool, queue) == []
    _, out, _ = await ingest(cfg, "activities", "list", "--json")
    (row,) = [r for r in orjson.loads(out) if r["id"] == str(act.id)]
    assert row["paused_at"] is not None and row["held_runs"] == 0

    _, out, _ = await ingest(cfg, "activities", "resume", str(act.id))
    assert "resumed activity" in out and "0 run(s) held" in out, out
    assert f"schedule: resumed     {sid}  (activity resumed)" in out, out
    assert not (await temporal.get_schedule_handle(sid).describe()).schedule.state.paused

    # Disabled and paused: the disabled note wins; enabled again, the pause stays.
    await db_pool.execute("UPDATE activities SET enabled = false WHERE id = $1", act.id)
    await ingest(cfg, "activities", "pause", str(act.id))
    state = (await temporal.get_schedule_handle(sid).describe()).schedule.state
    assert state.paused and state.note == DISABLED_NOTE
    await db_pool.execute("UPDATE activities SET enabled = true WHERE id = $1", act.id)
    await reconcile(temporal, db_pool, queue)
    state = (await temporal.get_schedule_handle(sid).describe()).schedule.state
    assert state.paused and state.note == PAUSED_NOTE
    await ingest(cfg, "activities", "resume", str(act.id))
    assert not (await temporal.get_schedule_handle(sid).describe()).schedule.state.paused


async def test_pause_then_resume_an_event_activity_from_the_cli(
    cfg, temporal, db_pool, cron_worker
):
    activity_id = await insert_activity(db_pool, [{"type": "noop"}])
    _, out, _ = await ingest(cfg, "activities", "pause", activity_id, "--actor", "ann")
    assert "by ann;" in out and "0 run(s) held" in out and "schedule" not in out, out
    runs = [event_run(activity_id) for _ in range(3)]
    async with cron_worker():
        handles = []
        for r in runs:
            handles.append(await start_run(temporal, r, cfg.temporal.task_queue))

            async def held(r=r) -> bool:
                status = await db_pool.fetchval(
                    "SELECT status FROM activity_runs WHERE run_id = $1::uuid", r.run_id
                )
                return bool(status == "held")

            await eventually(held, 60, "held")
        _, out, _ = await ingest(cfg, "activities", "list")
        (line,) = [ln for ln in out.splitlines() if ln.startswith(activity_id)]
        assert line.split()[-3:-1] == ["yes", "3"], line
        _, out, _ = await ingest(cfg, "activities", "resume", activity_id)
        assert "3 run(s) held, 3 resumed, 0 skipped" in out, out
        assert "signalled 3 run(s)" in out, out
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    assert [r.status for r in results] == ["succeeded"] * 3
    _, out, _ = await ingest(cfg, "activities", "resume", activity_id, "--skip-held")
    assert "was not paused; activity" in out and "0 run(s) held" in out, out
    _, _, err = await ingest(cfg, "activities", "pause", "no-such-activity", expect=1)
    assert "no activity" in err
