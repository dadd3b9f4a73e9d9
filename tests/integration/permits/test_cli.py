"""``ingest activities apply`` with resources, and ``ingest permits list|release``."""

from __future__ import annotations

import asyncio
import sys
import uuid

import httpx
import orjson
from pydantic import SecretStr

from ops.app import OpsDeps, create_app
from ops.settings import OpsSettings
from tests.support import ROOT
from tests.support.runs import event_run, registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext

# `apply` checks task types against the workers' handlers: this test's worker serves "hang".
HANG = ("--handlers", "tests.unit.workers.handler_fixtures:hang")


async def ingest(cfg, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", *args,
        "--database-url", cfg.database.url.get_secret_value(),
        "--temporal-address", cfg.temporal.address,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_apply_resources_then_list_and_release_a_held_permit(
    cfg, temporal, db_pool, permit_worker, tmp_path
):
    res = f"cli-{uuid.uuid4().hex[:6]}"
    trigger = {"type": "event", "event_type": "cli.test"}
    tasks = [{"type": "hang", "permit": {"resource": res}}]
    activity_id = str(uuid.uuid4())
    act = {"id": activity_id, "name": "permit-cli", "trigger": trigger, "tasks": tasks}
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps({"activities": [act]}))
    code, out = await ingest(cfg, "activities", "apply", str(bad), "--no-sync", *HANG)
    assert code == 2 and f"activities[0].tasks[0].permit.resource: resource '{res}'" in out
    assert await db_pool.fetchval("SELECT count(*) FROM activities") == 0  # nothing written
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps({"activities": [act], "resources": [
        {"name": res, "capacity": 2, "lease_seconds": 300}]}))  # fmt: skip
    code, out = await ingest(cfg, "activities", "apply", str(good), "--no-sync", *HANG)
    assert code == 0 and f"created  resource {res} (capacity 2, lease 300s)" in out, out

    code, out = await ingest(cfg, "permits", "release", res, "0")
    assert code == 1 and "never acquired" in out
    done = asyncio.Event()

    async def hang(ctx: TaskContext) -> None:
        await done.wait()

    run = event_run(activity_id)
    async with permit_worker(registry_with(hang=hang)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)

        async def held() -> bool:
            return bool(await db_pool.fetchval("SELECT count(*) FROM permit_slots"))

        await eventually(held, 30, "held")
        code, out = await ingest(cfg, "permits", "list", "--resource", res, "--json")
        assert code == 0, out
        (row,) = orjson.loads(out)
        assert (row["state"], row["token"], row["capacity"]) == ("held", 1, 2)
        assert row["holder"].startswith(f"task-{run.run_id}:hang:")
        # The ops service's GET /api/permits shows the same rows (behind its token).
        token = "permits-token-" + "p" * 32  # 32 characters at least
        ops = OpsSettings(host="127.0.0.1", port=0, token=SecretStr(token))
        app = create_app(OpsDeps(temporal, db_pool, cfg, ops))
        async with httpx.AsyncClient(  # a Host the ops API serves (ops.guard)
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as http:
            assert (await http.get("/api/permits")).status_code == 401
            resp = await http.get(
                "/api/permits",
                params={"resource": res},
                headers={"Authorization": f"Bearer {token}"},
            )
        assert resp.status_code == 200, resp.text
        (api_row,) = resp.json()["permits"]
        assert {k: v for k, v in api_row.items() if k != "age_seconds"} == {
            k: v for k, v in row.items() if k != "age_seconds"
        }
        code, out = await ingest(cfg, "permits", "release", res, row["slot"], "--run-id", "nope")
        assert code == 1 and "nothing released" in out
        code, out = await ingest(cfg, "permits", "release", res, row["slot"])
        assert code == 0 and row["permit_run_id"] in out, out

        async def released() -> bool:
            return await db_pool.fetchval("SELECT outcome FROM permit_slots") == "released"

        await eventually(released, 30, "released")
        code, out = await ingest(cfg, "permits", "list")
        assert code == 0 and "released" in out and res in out, out
        done.set()
        assert (await asyncio.wait_for(handle.result(), 60)).status == "succeeded"
