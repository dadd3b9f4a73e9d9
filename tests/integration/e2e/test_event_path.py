"""End to end on the real stack: raw topic -> ingress -> router -> worker -> PostgreSQL.

Some events carry ids, some do not, some are redelivered, some are malformed.
Exactly one RunActivityWorkflow and one activity_runs row per (subscribed
activity, unique event); task_instances as planned; malformed input in the DLQ.
"""

from __future__ import annotations

import uuid

import orjson

from schemas import ids
from tests.support import db, inprocess, kafka, metrics, wait
from tests.support.outbox import read_committed, running_relay


async def test_event_path_end_to_end(cfg, topics, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype = f"order.created.{tag}"
    a_emit = await db.seed_activity(
        db_pool,
        etype,
        tasks=[
            {"type": "noop"},
            {
                "type": "emit",
                "config": {"topic": topics.out},
                "idempotency_key": "confirm:{data.order_id}",
            },
        ],
    )
    a_noop = await db.seed_activity(db_pool, etype, tasks=[{"type": "noop"}])
    await db.seed_activity(db_pool, f"unrelated.{tag}")

    Records = list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]
    no_id: Records = [(None, db.event(etype, order_id=f"o-{tag}-{i}"), []) for i in range(10)]
    with_id: Records = [
        (None, db.event(etype, f"e-{tag}-{i}", order_id=f"p-{tag}-{i}"), []) for i in range(5)
    ]
    cloud: Records = [
        (
            None,
            orjson.dumps(
                {
                    "specversion": "1.0",
                    "id": f"ce-{tag}",
                    "type": etype,
                    "source": "/test",
                    "data": {"order_id": f"c-{tag}"},
                }
            ),
            [],
        )
    ]
    malformed: Records = [
        (None, b"not json", []),
        (None, b"[1, 2]", []),
        (None, b'{"data": {}}', []),
    ]
    coords = await kafka.produce(
        cfg.kafka.bootstrap_servers, topics.raw, no_id + with_id + cloud + malformed
    )
    # Broker redelivery / producer retry of the events that carry an id.
    await kafka.produce(cfg.kafka.bootstrap_servers, topics.raw, with_id)

    event_ids = [ids.source_event_id(topics.raw, p, o) for p, o in coords[:10]]
    event_ids += [f"e-{tag}-{i}" for i in range(5)] + [
        ids.cloudevent_event_id("/test", f"ce-{tag}")
    ]
    expected = {ids.event_workflow_id(a, e) for a in (a_emit, a_noop) for e in event_ids}
    dups_before = metrics.router_duplicates(missing_ok=True)

    async with inprocess.pipeline(cfg, temporal, db_pool, tag):

        async def all_runs_finished() -> bool:
            n = await db_pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
            )
            return n >= len(expected)

        await wait.eventually(all_runs_finished, 120, "every run to finish")

        async def state() -> tuple[object, ...]:
            runs = await db_pool.fetch(
                "SELECT status, count(*) AS n FROM activity_runs GROUP BY status ORDER BY status"
            )
            tasks = await db_pool.fetch(
                "SELECT status, count(*) AS n FROM task_instances GROUP BY status ORDER BY status"
            )
            return (
                tuple((r["status"], r["n"]) for r in runs),
                tuple((t["status"], t["n"]) for t in tasks),
                metrics.router_duplicates(missing_ok=True),
            )

        # A stray duplicate (a run, a task, a suppressed start) would change the state:
        # wait until it stays unchanged for a quiet period before asserting.
        await wait.quiet(state, "the runs, tasks and router duplicates", period=2.0, timeout=60)

    runs = await db_pool.fetch("SELECT workflow_id, run_id, status, event_id FROM activity_runs")
    assert {r["workflow_id"] for r in runs} == expected
    assert len(runs) == len(expected)
    assert all(r["run_id"] == ids.run_id_for(r["workflow_id"]) for r in runs)

    tasks = await db_pool.fetch("SELECT id, run_id, task_type, status FROM task_instances")
    assert len(tasks) == 3 * len(event_ids)  # 2 tasks for a_emit, 1 for a_noop
    assert {t["status"] for t in tasks} == {"succeeded"}
    for t in tasks:
        run_id, task_type, index = t["id"].removeprefix("task-").rsplit(":", 2)
        assert t["id"] == ids.task_workflow_id(run_id, task_type, int(index))

    for wid in list(expected)[:6]:
        execs = [w async for w in temporal.list_workflows(f"WorkflowId = '{wid}'")]
        assert len(execs) == 1, wid

    dlq = await kafka.read_all(cfg.kafka.bootstrap_servers, topics.dlq)
    assert sorted(dict(m.headers)["dlq_reason"] for m in dlq) == [
        b"missing_type",
        b"not_json",
        b"not_object",
    ]
    assert sorted(m.value for m in dlq) == sorted(v for _, v, _ in malformed)

    async with running_relay(cfg):  # emit writes the outbox; the relay publishes it
        emitted = await read_committed(cfg.kafka.bootstrap_servers, topics.out, len(event_ids))
    assert len(emitted) == len(event_ids)
    emit_ids = {t["id"] for t in tasks if t["task_type"] == "emit"}
    assert {m.key.decode() for m in emitted} == emit_ids

    # Each redelivered event is suppressed once per subscribed activity, no more.
    assert metrics.router_duplicates() - dups_before == 2 * len(with_id)
