"""singleton through the live router (no worker: a started run stays running).

skip: a trigger whose key has a running run is skipped and recorded; another key
starts; once the holder has ended (here: terminated, so nothing freed the key) the
next trigger takes the key. cancel: the new trigger cancels the running run of its key
and starts. The worker's finish-run bookkeeping frees the key.
"""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType

from router.settings import RouterSettings
from schemas import ids
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from workers import store


async def _route(cfg, temporal, db_pool, group: str, etype: str, events: list[tuple[str, str]]):
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event(etype, e, k=k), []) for e, k in events],
    )
    rcfg = RouterSettings(group=group, commit_interval_ms=100)
    return (await route_until_committed(cfg, rcfg, temporal, db_pool)).routing.stats


async def _cancel_requested(temporal, wid: str) -> bool:
    async for e in temporal.get_workflow_handle(wid).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
            return True
    return False


async def test_skip_mode_skips_while_the_key_runs(cfg, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"sg.{tag}", f"sg-{tag}"
    aid = await db.seed_activity(
        db_pool, etype, flow={"singleton": {"key": "data.k", "mode": "skip"}}
    )
    s = await _route(cfg, temporal, db_pool, group, etype, [(f"e1-{tag}", "a")])
    assert s.started == 1
    s = await _route(cfg, temporal, db_pool, group, etype, [(f"e2-{tag}", "a"), (f"e3-{tag}", "b")])
    assert (s.started, s.skipped) == (1, 1)
    skip = await db_pool.fetchrow(
        "SELECT workflow_id, reason, key FROM flow_decisions WHERE outcome = 'skip'"
    )
    assert dict(skip) == {
        "workflow_id": ids.event_workflow_id(aid, f"e2-{tag}"),
        "reason": "singleton",
        "key": "a",
    }
    # The holder ends without its worker freeing the key: Temporal says it is closed.
    await temporal.get_workflow_handle(ids.event_workflow_id(aid, f"e1-{tag}")).terminate()
    s = await _route(cfg, temporal, db_pool, group, etype, [(f"e4-{tag}", "a")])
    assert (s.started, s.skipped) == (1, 0)
    holder = await db_pool.fetchval(
        "SELECT workflow_id FROM flow_singleton WHERE activity_id = $1::uuid AND key = 'a'", aid
    )
    assert holder == ids.event_workflow_id(aid, f"e4-{tag}")


async def test_cancel_mode_cancels_the_running_run_and_starts(cfg, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"sc.{tag}", f"sc-{tag}"
    aid = await db.seed_activity(
        db_pool, etype, flow={"singleton": {"key": "data.k", "mode": "cancel"}}
    )
    first, second = (ids.event_workflow_id(aid, f"e{i}-{tag}") for i in (1, 2))
    assert (await _route(cfg, temporal, db_pool, group, etype, [(f"e1-{tag}", "a")])).started == 1
    assert not await _cancel_requested(temporal, first)
    s = await _route(cfg, temporal, db_pool, group, etype, [(f"e2-{tag}", "a")])
    assert (s.started, s.skipped) == (1, 0)
    assert await _cancel_requested(temporal, first)
    assert not await _cancel_requested(temporal, second)
    assert (
        await db_pool.fetchval(
            "SELECT cancelled FROM flow_decisions WHERE workflow_id = $1", second
        )
        == first
    )


async def test_finishing_a_run_frees_its_key(db_pool):
    aid, run_id, wid = uuid.uuid4(), uuid.uuid4(), f"wf-{uuid.uuid4().hex}"
    await db_pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind)"
        " VALUES ($1, $2, $3, 'event')",
        run_id,
        aid,
        wid,
    )
    await db_pool.execute(
        "INSERT INTO flow_singleton (activity_id, key, workflow_id) VALUES ($1, 'a', $2),"
        " ($1, 'b', 'someone-else')",
        aid,
        wid,
    )
    assert await store.finish_run(db_pool, str(run_id), "succeeded")
    left = await db_pool.fetch("SELECT key FROM flow_singleton WHERE activity_id = $1", aid)
    assert [r["key"] for r in left] == ["b"]
