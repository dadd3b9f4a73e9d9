"""The one writer of ``activities`` rows: created, updated, or kept as it is (seed-demo)."""

from __future__ import annotations

import uuid

from definitions import store
from schemas.definitions import ActivityDef


def _act(aid: uuid.UUID, name: str) -> ActivityDef:
    return ActivityDef.model_validate(
        {"id": aid, "name": name, "trigger": {"type": "event", "event_type": "t"}, "tasks": []}
    )


async def test_upsert_creates_updates_or_keeps(db_pool):
    aid = uuid.uuid4()
    assert await store.upsert(db_pool, [_act(aid, "first")]) == ["created"]
    assert await store.upsert(db_pool, [_act(aid, "second")]) == ["updated"]
    assert await store.upsert(db_pool, [_act(aid, "third")], keep_existing=True) == ["kept"]
    got = await store.get(db_pool, str(aid))
    assert got is not None and got.name == "second"
    other = uuid.uuid4()
    assert await store.upsert(db_pool, [_act(other, "new")], keep_existing=True) == ["created"]
    names = {str(r["id"]): r["name"] for r in await store.all_rows(db_pool)}
    assert names[str(aid)] == "second" and names[str(other)] == "new"


async def test_flow_round_trips_through_the_row_and_the_catalog(db_pool):
    from router.catalog import ActivityCatalog

    aid = uuid.uuid4()
    etype = f"flow.{aid}"
    flow = {"concurrency": {"limit": 2, "key": "data.k"}, "throttle": {"limit": 5, "period": "2s"}}
    act = ActivityDef.model_validate(
        {
            "id": aid,
            "name": "paced",
            "trigger": {"type": "event", "event_type": etype},
            "tasks": [],
            "flow": flow,
        }
    )
    await store.upsert(db_pool, [act])
    got = await store.get(db_pool, str(aid))
    assert got is not None and got.flow == act.flow
    catalog = ActivityCatalog(db_pool)
    await catalog.refresh()
    assert catalog.subscribers(etype) == (str(aid),)
    assert catalog.flow(str(aid)) == act.flow
    # Taking the block away makes the activity unpaced again, on the next refresh.
    await store.upsert(db_pool, [act.model_copy(update={"flow": None})])
    await catalog.refresh()
    assert catalog.flow(str(aid)) is None
