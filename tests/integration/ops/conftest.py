"""Fixtures of the ops tests: a worker with the ``charge`` handler, the ops API served
by uvicorn on a free port (the real FastAPI app, real Temporal/PostgreSQL/Kafka),
and a paused task to act on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client, WorkflowHandle

from ops.app import OpsDeps
from ops.identity import hash_token
from ops.service import OpsServer
from ops.settings import OpsSettings
from pipeline.settings import Settings
from pipeline.temporal_setup import register_search_attributes
from tests.integration.ops.handlers import charge
from tests.integration.workers.conftest import worker  # noqa: F401  (the worker fixture)
from tests.support.runs import event_run, insert_activity, start_run
from tests.support.wait import eventually
from workers.handlers import Registry, TaskContext, load_registry
from workers.handlers.base import Handler, register

TOKEN = f"tok-{uuid.uuid4().hex}"  # the shared token: identity "ops-token", no person
# A person's token each (INGEST_OPS_TOKENS_FILE): who acts comes from these, not the body.
PEOPLE = {
    name: f"{name}-{uuid.uuid4().hex}"
    for name in ("alice", "bob", "carol", "dave", "mallory", "ann", "after-crash")
}


def tokens_file(folder: Path) -> Path:
    path = folder / "ops-tokens"
    path.write_text("".join(f"{n}:{hash_token(t)}\n" for n, t in PEOPLE.items()))
    return path


def as_person(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {PEOPLE[name]}"}


def charge_registry(short: bool = False) -> Registry:
    """The built-ins plus ``charge``; ``short=True`` registers it as a short handler,
    so its tasks run it as a local activity."""
    reg = load_registry(use_entry_points=False)
    reg.add(register("charge", short=True)(_copy(charge)) if short else charge, "charge")
    return reg


def _copy(fn: Handler) -> Handler:
    async def same(ctx: TaskContext) -> None:
        await fn(ctx)

    return same


@pytest.fixture(scope="session")
async def search_attributes(temporal: Client) -> None:
    """The shared dev server may predate the attributes: register them (idempotent)."""
    await register_search_attributes(temporal, temporal.namespace)


@dataclass
class Api:
    url: str
    http: httpx.AsyncClient

    async def json(
        self, method: str, path: str, want: int = 200, as_: str | None = None, **kw: Any
    ) -> Any:
        """``as_``: with that person's token (else the shared one)."""
        if as_ is not None:
            kw["headers"] = {**kw.get("headers", {}), **as_person(as_)}
        resp = await self.http.request(method, path, **kw)
        assert resp.status_code == want, (resp.status_code, resp.text)
        return resp.json()


@pytest.fixture
async def ops_api(
    cfg: Settings,
    temporal: Client,
    db_pool: asyncpg.Pool,
    search_attributes: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Api]:
    people = tokens_file(tmp_path_factory.mktemp("ops"))
    ops = OpsSettings(host="127.0.0.1", port=0, token=SecretStr(TOKEN), tokens_file=people)
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
        yield Api(server.url, http)
    await server.stop()


@dataclass
class Paused:
    activity_id: str
    run_id: str
    task_id: str
    handle: WorkflowHandle


PauseFactory = Callable[..., Awaitable[Paused]]


@pytest.fixture
def paused_task(
    cfg: Settings, temporal: Client, db_pool: asyncpg.Pool, ops_api: Api
) -> PauseFactory:
    """Start a run whose ``charge`` task fails on bad data and wait until the API lists it.

    The caller runs a worker (the ``worker`` fixture, or a subprocess) meanwhile.
    """

    async def make(amount: Any = "ten", extra_tasks: list[dict[str, Any]] | None = None) -> Paused:
        charge_task = {
            "type": "charge",
            "payload": {"amount": amount, "currency": "EUR"},
            "config": {"max_attempts": 1},
            "on_failure": "pause",
        }
        activity_id = await insert_activity(db_pool, [charge_task, *(extra_tasks or [])])
        run = event_run(activity_id)
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        listed = await wait_listed(ops_api, activity_id)
        return Paused(activity_id, run.run_id, listed[0]["task_id"], handle)

    return make


async def wait_listed(api: Api, activity_id: str, want: int = 1) -> list[dict[str, Any]]:
    """Poll GET /api/tasks?status=pending_fix until visibility lists ``want`` tasks."""
    found: list[dict[str, Any]] = []

    async def listed() -> bool:
        nonlocal found
        body = await api.json(
            "GET", "/api/tasks", params={"status": "pending_fix", "activity": activity_id}
        )
        found = body["tasks"]
        return len(found) >= want

    await eventually(listed, 60, "the run to be listed")
    return found
