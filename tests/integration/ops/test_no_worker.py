"""An approval whose task queue no worker polls: the API answers 503 with the error body.

Issue 21: ``GET /api/approvals/{task_id}`` waited ~30 s for the query and answered a
bare 500 ("Internal Server Error", no JSON). On the real Temporal, with a task queue
nobody polls and ``INGEST_OPS_TEMPORAL_TIMEOUT_SECONDS`` lowered to 1 s.
"""

from __future__ import annotations

import uuid

import httpx
from pydantic import SecretStr

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from schemas.ids import task_workflow_id

from .conftest import TOKEN, as_person, tokens_file


async def test_no_worker_answers_503_with_the_error_body(cfg, temporal, db_pool, tmp_path):
    task_id = task_workflow_id(str(uuid.uuid4()), "approval", 0)
    handle = await temporal.start_workflow(
        "TaskInstanceWorkflow", id=task_id, task_queue=f"nobody-polls-{uuid.uuid4().hex}"
    )
    ops = OpsSettings(host="127.0.0.1", port=0, token=SecretStr(TOKEN), temporal_timeout_seconds=1,
                      tokens_file=tokens_file(tmp_path))  # fmt: skip
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
            got = await http.get(f"/api/approvals/{task_id}")
            decided = await http.post(
                f"/api/tasks/{task_id}/decision",
                json={"decision": "approve"},
                headers=as_person("alice"),
            )
    finally:
        await server.stop()
        await handle.terminate("test: nothing polls its task queue")

    for resp, what in ((got, "approval query"), (decided, "decide update")):
        assert resp.status_code == 503, (resp.status_code, resp.text)
        body = resp.json()
        assert set(body) == {"detail"}, body
        assert body["detail"].startswith(
            f"task {task_id}: no worker answered the {what} within 1 s"
        )
