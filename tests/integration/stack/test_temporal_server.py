"""The stack's real Temporal server (``stack/devstack/temporal_server.py``), for real:
its dynamic config passes the server's own check, and a private server in the single
shape runs a workflow that its web UI then lists. (The split shape and its faults:
``tests/faults/test_temporal_server_faults.py``.)"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from datetime import timedelta
from urllib.parse import quote

import httpx
import yaml
from devstack.temporal_server import dynamic_config
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.support.temporal_server import discard, private_server


def test_the_dynamic_config_passes_the_servers_own_check(tmp_path):
    server = private_server(tmp_path)
    bins = server.binaries()
    path = tmp_path / "dynamicconfig.yaml"
    path.write_text(yaml.safe_dump(dynamic_config(server.cfg)))
    res = subprocess.run(
        [str(bins.server), "validate-dynamic-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "warning" not in out.lower() and "error" not in out.lower(), out


@workflow.defn(name="ServerStackHello")
class Hello:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


async def test_a_private_server_runs_a_workflow_its_ui_lists(stack, tmp_path):
    server = private_server(tmp_path, shape="single", ui=True)
    try:
        await asyncio.to_thread(server.ensure)
        client = await Client.connect(server.address, namespace="default")
        queue = f"tq-{uuid.uuid4()}"
        wid = f"server-stack-{uuid.uuid4()}"
        async with Worker(
            client, task_queue=queue, workflows=[Hello], workflow_runner=UnsandboxedWorkflowRunner()
        ):
            result = await client.execute_workflow(
                Hello.run, "server", id=wid, task_queue=queue,
                execution_timeout=timedelta(seconds=60),
            )  # fmt: skip
        assert result == "hello server"
        ui = f"http://127.0.0.1:{server.cfg.temporal_ui_port}"
        query = quote(f'WorkflowId="{wid}"')
        async with httpx.AsyncClient(timeout=10) as http:
            page = await http.get(f"{ui}/")
            assert page.status_code == 200 and "<html" in page.text.lower()
            for _ in range(40):  # visibility is eventually consistent
                listed = await http.get(f"{ui}/api/v1/namespaces/default/workflows?query={query}")
                assert listed.status_code == 200, listed.text
                if wid in listed.text:
                    break
                await asyncio.sleep(0.5)
            assert wid in listed.text, listed.text
    finally:
        await discard(server, stack.admin_db_url)
