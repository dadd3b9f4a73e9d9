"""The worker's runner reads serialization contexts without entering the sandbox
(``workers.sandbox.DirectContexts``): every answer must equal the SDK's own,
sandboxed answer, for every kind of command a run issues (child workflow starts,
local activities, regular activities, completions)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.runs import event_run, insert_activity, registry_with, start_run
from workers import sandbox
from workers.handlers import TaskContext


async def regular(ctx: TaskContext) -> None:
    """Not short: runs as a scheduled activity (a handler's return value is unused)."""


async def test_direct_contexts_equal_the_sandboxed_ones(
    cfg, temporal, db_pool, worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, bool, bool]] = []  # (method, took the direct path, equal)

    def checked(method: str) -> Any:
        fast = getattr(sandbox.DirectContexts, method)

        def check(self: sandbox.DirectContexts, command_info: Any) -> Any:
            got = fast(self, command_info)
            want = getattr(self.sandboxed, method)(command_info)
            compared.append((method, self.direct, got == want))
            return got

        return check

    for method in ("get_serialization_context", "get_external_store_context"):
        monkeypatch.setattr(sandbox.DirectContexts, method, checked(method))

    activity_id = await insert_activity(
        db_pool, [{"type": "noop", "count": 2}, {"type": "regular"}]
    )
    async with worker(registry=registry_with(regular=regular)):
        handle = await start_run(temporal, event_run(activity_id), cfg.temporal.task_queue)
        result = await handle.result()

    assert (result.status, result.tasks_total, result.tasks_succeeded) == ("succeeded", 3, 3)
    methods = {m for m, _, _ in compared}
    assert methods == {"get_serialization_context", "get_external_store_context"}
    # a parent and three children, each with several payloads in and out
    assert len(compared) >= 40, len(compared)
    assert all(direct for _, direct, _ in compared), "an instance fell back to the sandboxed path"
    assert all(equal for _, _, equal in compared), [c for c in compared if not c[2]]
