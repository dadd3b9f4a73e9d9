"""Record workflow histories of the code on ``sys.path``, for replay by later versions.

A deployment upgrades workers while runs are in flight: a history written by the
previous release must replay, without non-determinism, on the new workflow code.
``tests/compat/test_history_compat.py`` replays every file in ``histories/``; this
script makes new ones. Run it from a checkout of the release being recorded:

    cd <checkout of release X> && python -m tests.compat.record_histories OUT_DIR

It only uses what every release has: ``RunActivityWorkflow``,
``TaskInstanceWorkflow``, ``RunActivities(pool, registry, resources)``, the
``noop`` and ``fail`` handlers, and the ``activities`` table of the first
migration. It needs the local stack (``ingest stack up``).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import asyncpg
import orjson
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.worker import Worker

from pipeline import db
from schemas.ids import event_workflow_id, run_id_for
from schemas.workflow_io import RunActivityInput
from workers.activities import RunActivities
from workers.handlers import Resources, load_registry
from workers.run_workflow import RunActivityWorkflow
from workers.task_workflow import TaskInstanceWorkflow

ADMIN_DB = "postgresql://postgres@127.0.0.1:55432/ingest"
TEMPORAL = "127.0.0.1:7233"

# One run per shape whose history must stay replayable.
SHAPES = {
    "one-noop": [{"type": "noop"}],
    "noop-and-fail": [
        {"type": "noop", "count": 2},
        {"type": "fail", "config": {"max_attempts": 1}},
    ],
}


async def _database() -> tuple[str, str]:
    name = f"compat_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(ADMIN_DB)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = ADMIN_DB.rpartition("/")[0] + "/" + name
    conn = await asyncpg.connect(url)
    await db.migrate(conn)
    await conn.close()
    return name, url


async def record(out: Path) -> list[Path]:
    name, url = await _database()
    client = await Client.connect(TEMPORAL)
    pool = await asyncpg.create_pool(url, min_size=1, max_size=5)
    queue = f"compat-{uuid.uuid4()}"
    acts = RunActivities(pool, load_registry(use_entry_points=False), Resources())
    written: list[Path] = []
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[RunActivityWorkflow, TaskInstanceWorkflow],
            activities=acts.all(),
        ):
            for shape, tasks in SHAPES.items():
                activity_id = str(uuid.uuid4())
                await pool.execute(
                    "INSERT INTO activities (id, name, enabled, trigger, tasks)"
                    " VALUES ($1, $2, true, $3::jsonb, $4::jsonb)",
                    uuid.UUID(activity_id),
                    f"compat-{shape}",
                    orjson.dumps({"type": "event", "event_type": "compat"}).decode(),
                    orjson.dumps(tasks).decode(),
                )
                event_id = f"evt-{uuid.uuid4().hex[:12]}"
                wid = event_workflow_id(activity_id, event_id)
                run = RunActivityInput(
                    activity_id=activity_id,
                    workflow_id=wid,
                    run_id=str(run_id_for(wid)),
                    trigger_kind="event",
                    event_id=event_id,
                    event={"event_id": event_id, "type": "compat", "data": {}},
                )
                handle = await client.start_workflow(
                    RunActivityWorkflow.run,
                    run,
                    id=wid,
                    task_queue=queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                )
                await asyncio.wait_for(handle.result(), 120)
                ids = [wid] + [
                    r["id"]
                    for r in await pool.fetch(
                        "SELECT id FROM task_instances WHERE run_id = $1 ORDER BY id",
                        uuid.UUID(run.run_id),
                    )
                ]
                for i, wf_id in enumerate(ids):
                    history = await client.get_workflow_handle(wf_id).fetch_history()
                    kind = "run" if i == 0 else f"task{i}"
                    path = out / f"{shape}.{kind}.json"
                    path.write_text(history.to_json())
                    written.append(path)
    finally:
        await pool.close()
        conn = await asyncpg.connect(ADMIN_DB)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    paths = asyncio.run(record(target))
    print("\n".join(str(p) for p in paths), flush=True)
    sys.stdout.flush()
    import os

    os._exit(0)  # temporalio runtime threads can abort interpreter finalisation
