"""``ingest activities apply|list``, ``ingest schedules sync|pause|resume``, run as a user would."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import orjson
import yaml
from temporalio.service import RPCError

from scheduler.spec import DISABLED_NOTE, OPERATOR_NOTE
from schemas.ids import schedule_id
from tests.support import ROOT


async def ingest(cfg, *args: str, expect: int = 0) -> tuple[int, str, str]:
    """Run ``ingest ARGS`` against the test's Temporal/database; its exit code must be
    ``expect`` (a command that printed the right thing but died still fails)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", *args,
        "--temporal-address", cfg.temporal.address,
        "--task-queue", cfg.temporal.task_queue,
        "--database-url", cfg.database.url.get_secret_value(),
        cwd=ROOT, env={**os.environ, "INGEST_LOG_LEVEL": "WARNING"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    code, stdout, stderr = proc.returncode, out.decode(), err.decode()
    assert code == expect, f"ingest {' '.join(args)}: exit {code}, not {expect}\n{stderr}"
    return code, stdout, stderr


def _doc(cron_id: uuid.UUID, event_id: uuid.UUID, **cron: object) -> dict:
    return {
        "activities": [
            {"id": str(event_id), "name": "on signup", "dedupe_key_strategy": "skip",
             "trigger": {"type": "event", "event_type": "user.signup"},
             "tasks": [{"type": "noop"}]},
            {"id": str(cron_id), "name": "hourly report", "enabled": cron.pop("enabled", True),
             "trigger": {"type": "cron", "cron": "0 * * * *", "timezone": "Europe/Paris", **cron},
             "tasks": [{"type": "noop"}]},
        ]
    }  # fmt: skip


async def test_apply_sync_twice_update_pause_delete(cfg, temporal, db_pool, tmp_path):
    cron_id, event_id = uuid.uuid4(), uuid.uuid4()
    sid = schedule_id(cron_id)
    path = tmp_path / "activities.yaml"
    path.write_text(yaml.safe_dump(_doc(cron_id, event_id)))
    try:
        code, out, err = await ingest(cfg, "activities", "apply", str(path))
        assert code == 0, err
        assert f"created  activity {cron_id}" in out and f"created     {sid}" in out
        desc = await temporal.get_schedule_handle(sid).describe()
        assert not desc.schedule.state.paused

        code, out, _ = await ingest(cfg, "schedules", "sync")
        assert (code, out.strip()) == (0, "schedules: no changes"), _

        path.write_text(yaml.safe_dump(_doc(cron_id, event_id, misfire_policy="compress")))
        code, out, _ = await ingest(cfg, "activities", "apply", str(path))
        assert code == 0 and f"updated     {sid}" in out and "misfire compress" in out
        assert f"updated  activity {cron_id}" in out
        code, out, _ = await ingest(cfg, "schedules", "sync")
        assert out.strip() == "schedules: no changes"

        path.write_text(yaml.safe_dump(_doc(cron_id, event_id, enabled=False)))
        code, out, _ = await ingest(cfg, "activities", "apply", str(path))
        assert f"paused      {sid}" in out
        desc = await temporal.get_schedule_handle(sid).describe()
        assert desc.schedule.state.paused and desc.schedule.state.note == DISABLED_NOTE

        path.write_text(yaml.safe_dump(_doc(cron_id, event_id)))
        code, out, _ = await ingest(cfg, "activities", "apply", str(path))
        assert f"resumed     {sid}" in out

        # An operator's pause survives syncs; resume lifts it.
        code, out, _ = await ingest(cfg, "schedules", "pause", str(cron_id))
        assert code == 0 and f"paused {sid}" in out
        code, out, _ = await ingest(cfg, "schedules", "sync")
        assert out.strip() == "schedules: no changes"
        desc = await temporal.get_schedule_handle(sid).describe()
        assert desc.schedule.state.paused and desc.schedule.state.note == OPERATOR_NOTE
        code, out, _ = await ingest(cfg, "schedules", "resume", str(cron_id))
        assert code == 0 and f"{sid}: resumed" in out
        assert not (await temporal.get_schedule_handle(sid).describe()).schedule.state.paused

        code, out, _ = await ingest(cfg, "activities", "list", "--json")
        listed = {a["id"]: a for a in orjson.loads(out)}
        assert listed[str(event_id)]["dedupe_key_strategy"] == "skip"
        assert listed[str(cron_id)]["trigger"]["misfire_policy"] == "skip"
        code, out, _ = await ingest(cfg, "activities", "list")
        assert "hourly report" in out and "DEDUPE_KEY_STRATEGY" in out

        await db_pool.execute("DELETE FROM activities WHERE id = $1", cron_id)
        code, out, _ = await ingest(cfg, "schedules", "sync")
        assert f"deleted     {sid}" in out, out
        code, out, _ = await ingest(cfg, "schedules", "sync")
        assert out.strip() == "schedules: no changes"
    finally:
        try:
            await temporal.get_schedule_handle(sid).delete()
        except RPCError:
            pass


async def test_apply_invalid_file_names_the_field_and_writes_nothing(cfg, db_pool, tmp_path):
    doc = _doc(uuid.uuid4(), uuid.uuid4(), misfire_policy="sometimes")
    doc["activities"][0]["trigger"]["event_type"] = ""
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(doc))
    _, _, err = await ingest(cfg, "activities", "apply", str(path), expect=2)
    assert "activities[1].trigger.misfire_policy: Input should be 'skip', 'catchup' or" in err
    assert "activities[0].trigger.event_type: String should have at least 1 character" in err
    assert await db_pool.fetchval("SELECT count(*) FROM activities") == 0
    path.write_text("activities: [")
    _code, _, err = await ingest(cfg, "activities", "apply", str(path), expect=2)
    assert "not valid JSON" in err
