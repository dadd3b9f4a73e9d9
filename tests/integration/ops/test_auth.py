"""``ingest ops`` as a real process: the bearer token guards every endpoint and never
appears in its output; without a token it refuses to start."""

from __future__ import annotations

import httpx

from tests.support.net import free_port, free_ports

from .procs import Proc, env_for, wait_http

ENDPOINTS = [
    ("GET", "/api/runs", None),
    ("GET", "/api/runs/00000000-0000-0000-0000-000000000000", None),
    ("GET", "/api/tasks?status=pending_fix", None),
    ("GET", "/api/tasks/task-x:charge:0", None),
    ("POST", "/api/tasks/task-x:charge:0/fix", {"patch": {"a": 1}}),
    ("POST", "/api/tasks/task-x:charge:0/skip", {}),
    ("POST", "/api/tasks/task-x:charge:0/abort", {}),
    ("GET", "/api/dlq", None),
    ("GET", "/api/dlq/0/0", None),
    ("POST", "/api/replay", {"from_offset": 0}),
    ("GET", "/api/activities", None),
    ("POST", "/api/activities/x/pause", {"actor": "a"}),
    ("POST", "/api/activities/x/resume", {"skip_held": True}),
]


async def test_every_endpoint_needs_the_token_and_the_token_is_never_printed(cfg):
    token = "s3cret-" + "x" * 24
    port, metrics = free_ports(2)
    env = env_for(
        cfg,
        INGEST_OPS_TOKEN=token,
        INGEST_OPS_PORT=str(port),
        INGEST_METRICS_PORT=str(metrics),
        INGEST_LOG_LEVEL="DEBUG",
    )
    proc = await Proc.start(env, "ops")
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_http(f"{base}/healthz", proc)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for method, path, body in ENDPOINTS:
                none = await http.request(method, path, json=body)
                assert none.status_code == 401, (path, none.text)
                assert none.headers["www-authenticate"] == "Bearer"
                wrong = await http.request(
                    method, path, json=body, headers={"Authorization": f"Bearer {token}x"}
                )
                assert wrong.status_code == 403, (path, wrong.text)
                assert token not in wrong.text
            ok = await http.get("/api/runs", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200 and ok.json() == {"runs": []}
            page = await http.get("/")
            assert page.status_code == 200 and "sessionStorage" in page.text
        async with httpx.AsyncClient() as http:
            scrape = (await http.get(f"http://127.0.0.1:{metrics}/metrics")).text
        assert "# TYPE pipeline_tasks_pending_fix gauge" in scrape
    finally:
        code = await proc.stop()
    assert code == 0, proc.text
    assert "ops API and console on" in proc.text
    assert token not in proc.text


async def test_refuses_to_start_without_a_token_unless_insecure_local(cfg):
    env = env_for(cfg, INGEST_OPS_TOKEN="", INGEST_OPS_PORT=str(free_port()))
    refused = await Proc.start(env, "ops")
    assert await refused.stop(None) == 2
    assert "INGEST_OPS_TOKEN is not set" in refused.text
    wide = await Proc.start({**env, "INGEST_OPS_HOST": "0.0.0.0"}, "ops", "--insecure-local")
    assert await wide.stop(None) == 2
    assert "--insecure-local needs INGEST_OPS_HOST=127.0.0.1" in wide.text
    local = await Proc.start(env, "ops", "--insecure-local")
    try:
        await wait_http(f"http://127.0.0.1:{env['INGEST_OPS_PORT']}/api/runs", local)
    finally:
        assert await local.stop() == 0, local.text
