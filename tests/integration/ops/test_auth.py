"""``ingest ops`` as a real process: the bearer token guards every endpoint and never
appears in its output; without a token it refuses to start."""

from __future__ import annotations

import asyncio
import re

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
    ("GET", "/api/whoami", None),
    ("POST", "/api/tasks/x/decision", {"decision": "approve"}),
    ("POST", "/api/flow/x/release", {"key": "k"}),
]


async def test_every_endpoint_needs_the_token_and_the_token_is_never_printed(cfg):
    token = "s3cret-" + "x" * 32
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
    short = await Proc.start({**env, "INGEST_OPS_TOKEN": "a"}, "ops")
    assert await short.stop(None) == 2
    assert "INGEST_OPS_TOKEN must be at least 32 characters" in short.text


async def test_insecure_local_makes_a_token_and_prints_the_console_link(cfg):
    """No mode without a secret: the link printed (as Jupyter does) is the way in; the API
    refuses anyone without it, any Host but the loopback names, and non-JSON writes."""
    port = free_port()
    env = env_for(cfg, INGEST_OPS_TOKEN="", INGEST_OPS_PORT=str(port))
    local = await Proc.start(env, "ops", "--insecure-local")
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_http(f"{base}/healthz", local)
        found = re.search(rf"{re.escape(base)}/#token=([A-Za-z0-9_-]+)", local.text)
        assert found is not None, local.text
        token = found.group(1)
        assert len(token) >= 32
        bearer = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            assert (await http.get("/api/runs")).status_code == 401
            assert (await http.get("/api/runs", headers=bearer)).status_code == 200
            me = (await http.get("/api/whoami", headers=bearer)).json()
            assert me == {"name": "ops-token", "kind": "shared-token", "person": False}
            local_name = await http.get(f"http://localhost:{port}/api/runs", headers=bearer)
            assert local_name.status_code == 200
            rebound = await http.get("/api/runs", headers={**bearer, "Host": f"evil.test:{port}"})
            assert rebound.status_code == 400
            # What a page on another origin can send without a preflight: text/plain.
            plain = await http.post("/api/replay", content=b'{"dlq": true, "dry_run": false}',
                                    headers={**bearer, "Content-Type": "text/plain"})  # fmt: skip
            assert plain.status_code == 415
    finally:
        assert await local.stop() == 0, local.text
    assert local.text.count(token) == 1  # the link only: never in a log line


async def test_a_body_over_the_cap_answers_413_on_the_real_server(cfg):
    port = free_port()
    token = "big-body-" + "x" * 32
    env = env_for(cfg, INGEST_OPS_TOKEN=token, INGEST_OPS_PORT=str(port),
                  INGEST_OPS_MAX_BODY_BYTES="65536")  # fmt: skip
    proc = await Proc.start(env, "ops")
    bearer = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    # 70 KB: with a Content-Length the guard answers before reading a byte of it; chunked,
    # as soon as it passes the 64 KiB cap.
    pad = [b'{"from_offset": 0, "pad": "', *([b"x" * 1000] * 70), b'"}']
    try:
        await wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        sized = await post_expecting_continue(port, "/api/replay", bearer, pad, chunked=False)
        chunked = await post_expecting_continue(port, "/api/replay", bearer, pad, chunked=True)
        anonymous = await post_expecting_continue(
            port, "/api/replay", {"Content-Type": "application/json"}, pad, chunked=False
        )
    finally:
        assert await proc.stop() == 0, proc.text
    assert (sized, chunked, anonymous) == (413, 413, 401)


async def post_expecting_continue(
    port: int, path: str, headers: dict[str, str], body: list[bytes], *, chunked: bool
) -> int:
    """The status of a POST sent as RFC 9110 asks of a client with a large body: with
    ``Expect: 100-continue``, the body only after ``100 Continue``, a piece at a time,
    stopping as soon as a final answer comes. A server that refuses a body unread then
    never has unread bytes when it closes; a client that sends it all at once (httpx) may
    meet the close as a reset that discards the answer (it did under CI load)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    framing = (
        {"Transfer-Encoding": "chunked"}
        if chunked
        else {"Content-Length": str(sum(map(len, body)))}
    )
    head = {"Host": f"127.0.0.1:{port}", "Expect": "100-continue", **headers, **framing}
    writer.write(
        f"POST {path} HTTP/1.1\r\n".encode()
        + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode()
        + b"\r\n"
    )
    await writer.drain()

    async def status(timeout: float) -> int:
        line = await asyncio.wait_for(reader.readline(), timeout)
        code = int(line.split()[1])
        if code == 100:
            await asyncio.wait_for(reader.readline(), timeout)  # the interim answer's end
        return code

    try:
        code = await status(30)
        if code != 100:
            return code  # refused before the body: not a byte of it sent
        for piece in body:
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
            await writer.drain()
            try:
                return await status(0.05)  # answered: send no more
            except TimeoutError:
                continue
        if chunked:
            writer.write(b"0\r\n\r\n")
        return await status(30)
    finally:
        writer.close()
