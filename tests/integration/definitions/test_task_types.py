"""Unknown task types: ``ingest activities apply`` refuses them; a run that meets one anyway
fails with one log line, not a traceback. Both as real processes, as an operator runs them."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid

import orjson

from tests.support import ROOT
from tests.support.process import clean_env
from tests.support.runs import event_run, insert_activity, start_run

HANDLERS = "tests.unit.workers.handler_fixtures"  # registers greet, shout, salute


def _env(cfg, **extra: str) -> dict[str, str]:
    return clean_env(
        TEMPORAL_ADDRESS=cfg.temporal.address,
        TEMPORAL_NAMESPACE=cfg.temporal.namespace,
        TEMPORAL_TASK_QUEUE=cfg.temporal.task_queue,
        DATABASE_URL=cfg.database.url.get_secret_value(),
        KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
        INGEST_METRICS_PORT="0",
        **extra,
    )


async def _apply(cfg, path, **env: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "activities", "apply", str(path), "--no-sync",
        cwd=ROOT, env=_env(cfg, **env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_apply_refuses_a_type_no_handler_serves(cfg, db_pool, tmp_path):
    tasks = [
        {"type": "noop"},
        {"type": "greet"},
        {"type": "approval", "config": {"approvers": "a"}},
    ]
    doc = {
        "activities": [
            {
                "id": str(uuid.uuid4()),
                "name": "typo",
                "trigger": {"type": "event", "event_type": "t"},
                "tasks": [*tasks, {"type": "nopo"}],
            }
        ]
    }
    path = tmp_path / "activities.json"
    path.write_bytes(orjson.dumps(doc))
    code, err = await _apply(cfg, path, INGEST_TASK_HANDLERS=HANDLERS)
    assert code == 2
    assert err.splitlines() == [
        f"{path}: activities[0].tasks[3].type: no handler serves task type 'nopo' (known:"
        " approval, emit, fail, greet, noop, salute, shout, webhook)"
    ]
    assert await db_pool.fetchval("SELECT count(*) FROM activities") == 0

    # Without the typo it is applied: `greet` counts as known through INGEST_TASK_HANDLERS...
    doc["activities"][0]["tasks"] = tasks
    path.write_bytes(orjson.dumps(doc))
    code, err = await _apply(cfg, path, INGEST_TASK_HANDLERS=HANDLERS)
    assert (code, await db_pool.fetchval("SELECT count(*) FROM activities")) == (0, 1), err
    # ...and only through it.
    code, err = await _apply(cfg, path)
    assert code == 2 and "no handler serves task type 'greet'" in err


async def test_a_run_meeting_an_unknown_type_fails_with_one_log_line(cfg, temporal, db_pool):
    # Stored straight into the table, as a definition written before `apply` checked.
    activity_id = await insert_activity(db_pool, [{"type": "noop"}, {"type": "nopo"}])
    run = event_run(activity_id)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.commands", "worker",
        cwd=ROOT, env=_env(cfg, INGEST_LOG_LEVEL="INFO"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert (result.status, result.tasks_failed, result.tasks_succeeded) == ("failed", 1, 1)
    logs = (out + err).decode()
    assert "Traceback" not in logs, logs
    (line,) = [line for line in logs.splitlines() if "nopo" in line]
    assert "no handler for task type 'nopo'" in line
    assert "registered: emit, fail, noop, webhook" in line


async def test_apply_warns_about_an_activity_whose_run_cannot_carry_the_largest_event(
    cfg, db_pool, tmp_path
):
    """3 tasks each carrying a 1 MB event make a 3 MB plan, over Temporal's 2 MB payload
    limit: applied (exit 0), with one warning that such events go to the DLQ."""
    doc = {
        "activities": [
            {
                "id": str(uuid.uuid4()),
                "name": "three tasks",
                "trigger": {"type": "event", "event_type": "t"},
                "tasks": [{"type": "noop"}, {"type": "noop"}, {"type": "noop"}],
            }
        ]
    }
    path = tmp_path / "activities.json"
    path.write_bytes(orjson.dumps(doc))
    code, err = await _apply(cfg, path)
    assert code == 0, err
    (line,) = err.splitlines()
    assert line.startswith(f"{path}: warning: activities[0].tasks: 3 tasks each carry the event")
    assert line.endswith("larger events go to the DLQ as run_too_large")
    code, err = await _apply(cfg, path, INGEST_MAX_EVENT_BYTES="600000")
    assert (code, err) == (0, "")
