"""Webhook secrets by reference, resolved in the activity, and URLs redacted in every
error the webhook handler raises (``workers/handlers/webhook_secrets.py``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.workflow_io import TaskSpec
from workers.handlers import PermanentTaskError, Resources, RetryableTaskError, TaskContext
from workers.handlers.builtin import webhook
from workers.handlers.webhook_secrets import (
    SecretSource,
    literal_secret_headers,
    redact_url,
    resolve_headers,
    resolve_url,
    webhook_config_problems,
    webhook_config_warnings,
)
from workers.settings import WorkerSettings

TOKEN = "Bearer tok-3c7f0a9e-secret"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hook.example/x", "https://hook.example/x"),
        ("https://bob:hunter22@hook.example:8443/x", "https://***@hook.example:8443/x"),
        ("https://hook.example/x?token=abcd&v=2", "https://hook.example/x?token=***&v=***"),
        ("https://hook.example/x?sig-only", "https://hook.example/x?***"),
        ("https://hook.example/x#frag", "https://hook.example/x#***"),
        ("http://u:p@[::1/x?k=v", "http://***@[::1/x?***"),  # unparsable: cut at '?'
        ("http://h:notaport/x?k=v", "http://h:notaport/x?***"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_url_hides_a_path_that_came_by_reference() -> None:
    url = "https://hooks.slack.example/services/T0/B0/XyZsecret"
    assert redact_url(url, keep_path=False) == "https://hooks.slack.example/***"
    assert redact_url("https://h.example/", keep_path=False) == "https://h.example/"


def _source(tmp_path: Path, **env: str) -> SecretSource:
    return SecretSource("WEBHOOK_", tmp_path, environ=env)


def test_headers_resolve_from_env_and_file(tmp_path: Path) -> None:
    (tmp_path / "crm").write_text("  key-from-file\n")
    config = {
        "headers": {"X-Tenant": "acme"},
        "headers_from_env": {"Authorization": "WEBHOOK_CRM_TOKEN"},
        "headers_from_file": {"X-Api-Key": "crm"},
    }
    headers, secrets = resolve_headers(config, _source(tmp_path, WEBHOOK_CRM_TOKEN=TOKEN))
    assert headers == {"X-Tenant": "acme", "Authorization": TOKEN, "X-Api-Key": "key-from-file"}
    assert secrets == [TOKEN, "key-from-file"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"headers_from_env": {"Authorization": "DATABASE_URL"}}, "does not start with"),
        ({"headers_from_env": {"Authorization": "WEBHOOK_MISSING"}}, "WEBHOOK_MISSING is not set"),
        ({"headers_from_env": {"Authorization": "not a name"}}, "must name an environment"),
        ({"headers_from_env": ["WEBHOOK_X"]}, r"headers_from_env must be an object"),
        ({"headers_from_file": {"Authorization": "../etc/passwd"}}, "outside"),
        ({"headers_from_file": {"Authorization": "/etc/hostname"}}, "outside"),
        ({"headers_from_file": {"Authorization": "absent"}}, "cannot read"),
        ({"headers_from_file": {"Authorization": "multi"}}, "line break"),
        ({"headers_from_file": {"Authorization": "empty"}}, "is empty"),
        (
            {"headers": {"authorization": "x"}, "headers_from_env": {"Authorization": "WEBHOOK_T"}},
            "given twice",
        ),
        ({"headers": {"Bad Name": "x"}}, "bad header name"),
    ],
)
def test_bad_references_fail_the_task_without_the_value(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    (tmp_path / "multi").write_text("line1\nline2-secret\n")
    (tmp_path / "empty").write_text("\n")
    source = _source(tmp_path, WEBHOOK_T=TOKEN, DATABASE_URL="postgresql://u:pw@db/x")
    with pytest.raises(PermanentTaskError, match=message) as e:
        resolve_headers(config, source)
    assert "line2-secret" not in str(e.value)
    assert "pw@db" not in str(e.value)


def test_a_symlink_out_of_the_secrets_dir_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("host secret")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "link").symlink_to(outside)
    with pytest.raises(PermanentTaskError, match="outside"):
        resolve_headers({"headers_from_file": {"X-Key": "link"}}, SecretSource("", secrets))


def test_url_by_reference(tmp_path: Path) -> None:
    (tmp_path / "hook-url").write_text("https://hooks.example/T0/secret-path\n")
    source = _source(tmp_path, WEBHOOK_URL="https://h.example/x?token=abcd")
    assert resolve_url({"url_from_env": "WEBHOOK_URL"}, source) == (
        "https://h.example/x?token=abcd",
        True,
    )
    assert resolve_url({"url_from_file": "hook-url"}, source)[0].endswith("/secret-path")
    with pytest.raises(PermanentTaskError, match="exactly one"):
        resolve_url({"url": "https://a/", "url_from_env": "WEBHOOK_URL"}, source)
    with pytest.raises(PermanentTaskError, match=r"config\.url must give an http\(s\) URL"):
        resolve_url({"url": "ftp://u:secretpw@h/"}, source)


def test_literal_credentials_are_found() -> None:
    config = {"url": "https://h/", "headers": {"Authorization": "x", "X-Trace": "1"}}
    assert literal_secret_headers(config) == ["Authorization"]
    assert literal_secret_headers({"headers": {"X-Signature-Token": "x"}}) == ["X-Signature-Token"]
    problems = webhook_config_problems(config)
    assert len(problems) == 1 and "headers_from_env" in problems[0]
    assert webhook_config_problems({"url": "https://h/x", "headers_from_env": {"A": "B"}}) == []
    assert webhook_config_problems({"url": "https://h/x?key=hunter2"}) == []
    [q] = webhook_config_warnings({"url": "https://h/x?key=hunter2"})
    assert "hunter2" not in q and "url_from_env" in q
    assert webhook_config_warnings({"url": "https://h/x"}) == []


def test_worker_settings_name_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_WEBHOOK_SECRET_ENV_PREFIX", "HOOKS_")
    monkeypatch.setenv("INGEST_WEBHOOK_SECRETS_DIR", "/var/run/hook-secrets")
    source = WorkerSettings().webhook_secrets()
    assert source.env_prefix == "HOOKS_"
    assert source.secrets_dir == Path("/var/run/hook-secrets")


# --- the handler --------------------------------------------------------------------------


def _ctx(resources: Resources, config: dict[str, Any], activity: str = "act") -> TaskContext:
    spec = TaskSpec("webhook", 0, payload={"a": 1}, config=config)
    return TaskContext("task-r:webhook:0", "r", activity, spec, 1, resources)


def _resources(reply: Any, tmp_path: Path, **env: str) -> Resources:
    http = httpx.AsyncClient(transport=httpx.MockTransport(reply))
    return Resources(http_client=http, secrets=_source(tmp_path, **env))


async def test_the_handler_sends_the_resolved_header(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    res = _resources(reply, tmp_path, WEBHOOK_TOKEN=TOKEN)
    config = {"url": "https://h.example/x", "headers_from_env": {"Authorization": "WEBHOOK_TOKEN"}}
    await webhook(_ctx(res, config))
    assert seen[0].headers["Authorization"] == TOKEN
    assert seen[0].headers["Idempotency-Key"] == "task-r:webhook:0"
    await res.close()


async def test_a_transport_error_quotes_the_url_redacted(tmp_path: Path) -> None:
    url = "https://bob:hunter22@h.example/x?token=qwerty123#frag"

    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to {url} (token qwerty123)", request=request)

    res = _resources(boom, tmp_path)
    with pytest.raises(RetryableTaskError) as e:
        await webhook(_ctx(res, {"url": url}))
    message = str(e.value)
    assert "https://***@h.example/x?token=***#***" in message
    assert "ConnectError" in message
    for secret in ("hunter22", "qwerty123", "bob:"):
        assert secret not in message
    # No exception chain: Temporal's failure would carry the cause's message.
    assert e.value.__cause__ is None and e.value.__suppress_context__


async def test_an_invalid_url_is_permanent_and_redacted(tmp_path: Path) -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("not sent")

    res = _resources(never, tmp_path)
    with pytest.raises(PermanentTaskError) as e:
        await webhook(_ctx(res, {"url": "https://u:hunter22@h.example:abc/x?k=secretval"}))
    assert "hunter22" not in str(e.value) and "secretval" not in str(e.value)


async def test_a_url_by_reference_is_hidden_path_and_all(tmp_path: Path) -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    res = _resources(boom, tmp_path, WEBHOOK_SLACK="https://hooks.example/services/T0/XyZsecret")
    with pytest.raises(RetryableTaskError) as e:
        await webhook(_ctx(res, {"url_from_env": "WEBHOOK_SLACK"}))
    assert "https://hooks.example/***" in str(e.value)
    assert "XyZsecret" not in str(e.value)


async def test_an_echoed_secret_in_a_rejection_is_scrubbed(tmp_path: Path) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, text=f"bad credentials: {request.headers['Authorization']}")

    res = _resources(echo, tmp_path, WEBHOOK_TOKEN=TOKEN)
    config = {"url": "https://h.example/x", "headers_from_env": {"Authorization": "WEBHOOK_TOKEN"}}
    with pytest.raises(PermanentTaskError, match="HTTP 401") as e:
        await webhook(_ctx(res, config))
    assert "tok-3c7f0a9e" not in str(e.value)


async def test_a_literal_credential_is_warned_once_per_activity(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    res = _resources(lambda request: httpx.Response(200), tmp_path)
    config = {"url": "https://h.example/x", "headers": {"Authorization": "Bearer literal"}}
    with caplog.at_level(logging.WARNING, logger="workers.handlers.builtin"):
        for _ in range(3):
            await webhook(_ctx(res, config))
        await webhook(_ctx(res, config, activity="other"))
    warnings = [r.getMessage() for r in caplog.records if "headers_from_env" in r.getMessage()]
    assert len(warnings) == 2
    assert all("Bearer literal" not in w for w in warnings)
