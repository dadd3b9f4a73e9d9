"""``ops.guard`` on the real app (``ops.app.create_app``), no service behind it: the body
is never read before authentication, caps answer 413 (by length and while a chunked body
streams), writes need JSON (415), ``Host`` is checked, every answer has the security
headers, and who acts comes from the credentials (issue 36, review findings 5-7, 12, 13).

No client, pool or settings is given: a request that got past the guard and the field
checks reaches them and answers 500, which is how a test tells "let through" apart."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from pydantic import SecretStr

from ops import headers
from ops.app import OpsDeps, create_app
from ops.guard import FailedAuth
from ops.identity import hash_token
from ops.settings import OpsSettings

SHARED = "shared-" + "s" * 40
ALICE = "alice-" + "a" * 40
PORT = 8080
HOST = f"127.0.0.1:{PORT}"


def _app(tmp_path: Path, **ops: Any) -> Any:
    people = tmp_path / "tokens"
    people.write_text(f"# name:sha256\nalice:{hash_token(ALICE)}\n")
    settings = OpsSettings(token=SecretStr(SHARED), tokens_file=people, port=PORT, **ops)
    deps = OpsDeps(client=None, pool=None, settings=None, ops=settings)  # type: ignore[arg-type]
    return create_app(deps)


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return _app(tmp_path)


def _client(app: Any, **headers: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}", headers=headers)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- the body is not read before the refusal -------------------------------------------


async def _call(
    app: Any, method: str, path: str, hdrs: dict[str, str], receive: Callable[[], Awaitable[Any]]
) -> tuple[int, dict[str, str], bytes]:
    """A raw ASGI request; the answer's status, headers and body."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("10.9.8.7", 5555), "server": ("127.0.0.1", PORT),
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": HOST, **hdrs}.items()],
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    got = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], got, b"".join(m.get("body", b"") for m in sent[1:])


async def _never() -> Any:
    pytest.fail("the body was read before the request was refused")


JSON = {"Content-Type": "application/json", "Content-Length": "2000000000"}


@pytest.mark.parametrize(
    ("hdrs", "status"),
    [
        (JSON, 401),  # no token
        ({**JSON, **_bearer("wrong-" + "w" * 40)}, 403),
        ({**_bearer(SHARED), "Content-Type": "text/plain", "Content-Length": "20"}, 415),
        ({**_bearer(SHARED), "Content-Length": "20"}, 415),  # no content type at all
        ({**_bearer(SHARED), **JSON}, 413),  # 2 GB announced
        ({**JSON, **_bearer(SHARED), "Host": "evil.example:8080"}, 400),  # DNS rebinding
    ],
)
async def test_refused_before_a_byte_of_the_body_is_read(app, hdrs, status):
    code, got, body = await _call(app, "POST", "/api/replay", hdrs, _never)
    assert code == status, body
    assert SHARED not in body.decode() and "w" * 40 not in body.decode()
    assert got["connection"] == "close"
    if status == 401:
        assert got["www-authenticate"] == "Bearer"


async def test_a_chunked_body_is_cut_at_the_cap(tmp_path):
    app = _app(tmp_path, max_body_bytes=4096)
    reads = 0

    async def chunked() -> dict[str, Any]:  # endless 1 KiB chunks, no Content-Length
        nonlocal reads
        reads += 1
        assert reads < 50, "the guard kept reading past the cap"
        return {"type": "http.request", "body": b" " * 1024, "more_body": True}

    hdrs = {**_bearer(SHARED), "Content-Type": "application/json"}
    code, _, body = await _call(app, "POST", "/api/replay", hdrs, chunked)
    assert code == 413 and b"INGEST_OPS_MAX_BODY_BYTES" in body
    assert reads == 5  # 5 KiB read: the first chunk past 4 KiB


async def test_a_body_under_the_cap_reaches_the_route(tmp_path):
    app = _app(tmp_path, max_body_bytes=4096)
    async with _client(app, **_bearer(SHARED)) as http:
        over = await http.post("/api/replay", content=b"[" + b" " * 5000 + b"]",
                               headers={"Content-Type": "application/json"})  # fmt: skip
        under = await http.post("/api/replay", json={"from_offset": 0})
    assert over.status_code == 413
    assert under.status_code == 500  # past the guard: the missing settings fail the replay


# --- Host ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        (HOST, True),
        (f"localhost:{PORT}", True),
        (f"[::1]:{PORT}", True),
        ("127.0.0.1:9999", False),  # another port
        ("127.0.0.1", False),
        ("attacker.example:8080", False),
        ("", False),
    ],
)
async def test_only_the_loopback_names_with_the_port_when_bound_to_loopback(app, host, ok):
    async with _client(app) as http:
        resp = await http.get("/healthz", headers={"Host": host})
    assert (resp.status_code == 200) is ok, resp.text


async def test_an_allow_list_and_any_host(tmp_path):
    listed = _app(tmp_path, host="0.0.0.0", allowed_hosts="ops.example.com, 10.0.0.5:8080")
    anyhost = _app(tmp_path, host="0.0.0.0")
    async with _client(listed) as http:
        for host, want in [("ops.example.com", 200), ("ops.example.com:443", 200),
                           ("10.0.0.5:8080", 200), ("10.0.0.5:80", 400),
                           ("evil.example", 400)]:  # fmt: skip
            assert (await http.get("/healthz", headers={"Host": host})).status_code == want, host
    async with _client(anyhost) as http:
        assert (await http.get("/healthz", headers={"Host": "whatever:1"})).status_code == 200


# --- security headers, CSP, /docs --------------------------------------------------------


def _inline(html: str, tag: str) -> str:
    found = re.search(rf"<{tag}>(.*?)</{tag}>", html, re.S)
    assert found is not None
    return found.group(1)


async def test_every_answer_has_the_security_headers(app):
    async with _client(app) as http:
        answers = {
            "console": await http.get("/"),
            "healthz": await http.get("/healthz"),
            "401": await http.get("/api/runs"),
            "403": await http.get("/api/runs", headers=_bearer("x" * 40)),
            "unknown path": await http.get("/nowhere", headers=_bearer(SHARED)),
            "500": await http.get("/api/runs", headers=_bearer(SHARED)),  # no pool
            "host refused": await http.get("/", headers={"Host": "evil.example"}),
        }
    assert answers["500"].status_code == 500
    for what, resp in answers.items():
        h = resp.headers
        assert h["x-frame-options"] == "DENY", what
        assert h["x-content-type-options"] == "nosniff", what
        assert h["referrer-policy"] == "no-referrer", what
        assert "frame-ancestors 'none'" in h["content-security-policy"], what
        assert "unsafe-inline" not in h["content-security-policy"], what
    assert answers["401"].headers["content-security-policy"] == headers.API_CSP


async def test_the_console_csp_allows_its_own_script_and_style_by_hash_only(app):
    async with _client(app) as http:
        page = await http.get("/")
    csp = page.headers["content-security-policy"]
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        digest = hashlib.sha256(_inline(page.text, tag).encode()).digest()
        source = headers.sha256_source(_inline(page.text, tag))
        assert source == f"'sha256-{base64.b64encode(digest).decode()}'"
        policy = next(p.strip() for p in csp.split(";") if p.strip().startswith(directive))
        assert policy == f"{directive} {source}", csp
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert len(re.findall(r"<script", page.text)) == 1  # one inline script, no src


async def test_docs_only_behind_the_flag_and_no_redoc(app, tmp_path):
    async with _client(app) as http:
        assert (await http.get("/docs")).status_code == 401  # not public, and not served
        assert (await http.get("/docs", headers=_bearer(SHARED))).status_code == 404
        assert (await http.get("/redoc", headers=_bearer(SHARED))).status_code == 404
        assert (await http.get("/openapi.json")).status_code == 200
    async with _client(_app(tmp_path, api_docs=True)) as http:
        docs = await http.get("/docs")
        assert (await http.get("/redoc", headers=_bearer(SHARED))).status_code == 404
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    csp = docs.headers["content-security-policy"]
    assert headers.sha256_source(_inline(docs.text, "script")) in csp
    assert "https://cdn.jsdelivr.net" in csp and "unsafe-inline" not in csp


# --- identity: whoami, actor and by come from the credentials ----------------------------


async def test_whoami_names_the_shared_token_and_a_person(app):
    async with _client(app) as http:
        shared = (await http.get("/api/whoami", headers=_bearer(SHARED))).json()
        alice = (await http.get("/api/whoami", headers=_bearer(ALICE))).json()
    assert shared == {"name": "ops-token", "kind": "shared-token", "person": False}
    assert alice == {"name": "alice", "kind": "person-token", "person": True}


async def test_an_actor_or_by_naming_someone_else_is_refused(app):
    async with _client(app, **_bearer(ALICE)) as http:
        other = await http.post("/api/tasks/t/skip", json={"actor": "bob"})
        same = await http.post("/api/tasks/t/skip", json={"actor": "alice"})
        left_out = await http.post("/api/tasks/t/abort", json={})
        decision = {"by": "bob", "decision": "approve"}
        by_other = await http.post("/api/tasks/t/decision", json=decision)
        pause = await http.post("/api/activities/x/pause", json={"actor": "bob"})
        release = await http.post("/api/flow/x/release", json={"actor": "bob", "key": "k"})
    for resp, field in ((other, "actor"), (by_other, "by"), (pause, "actor"), (release, "actor")):
        assert resp.status_code == 403, resp.text
        assert resp.json()["field"] == field and "'alice'" in resp.json()["detail"]
    assert same.status_code == left_out.status_code == 500  # let through (no Temporal here)


async def test_the_shared_token_decides_no_approval(app):
    async with _client(app, **_bearer(SHARED)) as http:
        decide = await http.post("/api/tasks/t/decision", json={"decision": "approve"})
        resubmit = await http.post("/api/tasks/t/resubmission", json={"payload": {"a": 1}})
        skip = await http.post("/api/tasks/t/skip", json={})
    for resp in (decide, resubmit):
        assert resp.status_code == 403 and resp.json()["field"] == "by", resp.text
        assert "shared INGEST_OPS_TOKEN" in resp.json()["detail"]
    assert skip.status_code == 500  # a fix, skip or abort it may do (no Temporal here)


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"patch": _deep(40)}, "nested deeper than 32"),
        ({"patch": {"a": "x\u0000"}}, "NUL"),
        ({"patch": {"a": "x" * 300_000}}, "more than 262144"),
    ],
)
async def test_patch_caps(app, body, problem):
    async with _client(app, **_bearer(ALICE)) as http:
        resp = await http.post("/api/tasks/t/fix", content=orjson.dumps(body),
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert resp.status_code == 400 and resp.json()["field"] == "patch", resp.text
    assert problem in resp.json()["detail"]


async def test_resubmission_payload_caps(app):
    async with _client(app, **_bearer(ALICE)) as http:
        resp = await http.post("/api/tasks/t/resubmission", json={"payload": _deep(33)})
    assert resp.status_code == 400 and resp.json()["field"] == "payload", resp.text


# --- failed attempts ------------------------------------------------------------------------


async def test_repeated_wrong_tokens_from_one_address_are_slowed(tmp_path):
    app = _app(tmp_path, auth_failure_limit=3)
    async with _client(app) as http:
        wrong = [(await http.get("/api/runs", headers=_bearer("n" * 40))).status_code
                 for _ in range(4)]  # fmt: skip
        right = await http.get("/api/whoami", headers=_bearer(SHARED))
    assert wrong == [403, 403, 403, 429]
    assert right.status_code == 429 and int(right.headers["retry-after"]) >= 1


def test_failed_auth_forgets_after_the_window():
    now = [1000.0]
    limit = FailedAuth(2, clock=lambda: now[0])
    limit.failed("a")
    limit.failed("a")
    assert limit.retry_after("a") is not None and limit.retry_after("b") is None
    now[0] += 61
    assert limit.retry_after("a") is None
    assert FailedAuth(0).retry_after("a") is None
