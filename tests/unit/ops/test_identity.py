"""``ops.identity`` and the identity settings: the tokens file, the proxy header only from
a pinned address, the shared token's name, short tokens refused at start-up, and the
console link with its token."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from ops.app import OpsDeps, create_app
from ops.identity import (
    PERSON,
    PROXY,
    SHARED,
    Authenticator,
    IdentityError,
    console_url,
    hash_token,
    load_tokens_file,
    new_local_token,
)
from ops.settings import OpsSettings, load_ops_settings, startup_problem
from pipeline.settings import ConfigError

ALICE = "alice-" + "a" * 40
BOB = "bob-" + "b" * 40


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    return path


def test_a_tokens_file_maps_hashes_to_names(tmp_path):
    text = f"# who\n\nalice:{hash_token(ALICE)}\n bob : {hash_token(BOB).upper()}\n"
    path = _file(tmp_path, text)
    people = load_tokens_file(path)
    assert [n for n, _ in people] == ["alice", "bob"]
    auth = Authenticator(None, "ops-token", people)
    assert auth.from_token(ALICE) is not None and auth.from_token(ALICE).name == "alice"  # type: ignore[union-attr]
    assert auth.from_token(BOB).kind == PERSON  # type: ignore[union-attr]
    assert auth.from_token(ALICE + "x") is None
    assert auth.from_token(hash_token(ALICE)) is None  # the hash itself is no token


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice\n", "line 1: want name:sha256"),
        (f"alice:{'0' * 63}\n", "line 1: want name:sha256"),
        (f"# c\n:{'0' * 64}\n", "line 2: the name is empty"),
        (f"al\tice:{'0' * 64}\n", "control character"),
        (f"a:{'0' * 64}\nb:{'0' * 64}\n", "line 2: the same token hash"),
    ],
)
def test_a_bad_tokens_file_names_its_line(tmp_path, text, problem):
    with pytest.raises(IdentityError, match=problem):
        load_tokens_file(_file(tmp_path, text))
    cfg = OpsSettings(token=None, tokens_file=tmp_path / "tokens")
    assert problem.split(":")[0] in str(startup_problem(cfg, False))
    assert "INGEST_OPS_TOKENS_FILE" in str(startup_problem(cfg, False))


def test_the_shared_token_has_its_own_name_which_no_person_may_take(tmp_path):
    auth = Authenticator("s" * 40, "deploy-bot", [])
    who = auth.from_token("s" * 40)
    assert who is not None and (who.name, who.kind, who.person) == ("deploy-bot", SHARED, False)
    clash = _file(tmp_path, f"ops-token:{hash_token(ALICE)}\n")
    assert "the shared token's name" in str(startup_problem(OpsSettings(tokens_file=clash), False))


def test_the_proxy_header_counts_only_from_a_pinned_address():
    nets = [ipaddress.ip_network("10.0.0.0/24"), ipaddress.ip_network("::1/128")]
    auth = Authenticator(None, "ops-token", [], "X-Forwarded-User", nets)
    hdrs = {"x-forwarded-user": "carol"}
    who = auth.from_proxy("10.0.0.7", hdrs)
    assert who is not None and (who.name, who.kind, who.person) == ("carol", PROXY, True)
    assert auth.from_proxy("::1", hdrs) is not None
    assert auth.from_proxy("10.0.1.7", hdrs) is None  # not the proxy
    assert auth.from_proxy(None, hdrs) is None
    assert auth.from_proxy("10.0.0.7", {}) is None
    assert auth.from_proxy("10.0.0.7", {"x-forwarded-user": "ca\x00rol"}) is None


async def test_the_proxy_header_through_the_app(tmp_path):
    ops = OpsSettings(token=None, identity_header="X-Forwarded-User",
                      trusted_proxies="127.0.0.1", port=8080)  # fmt: skip
    deps = OpsDeps(client=None, pool=None, settings=None, ops=ops)  # type: ignore[arg-type]
    results: dict[str, Any] = {}
    for client in ("127.0.0.1", "10.1.1.1"):
        transport = httpx.ASGITransport(app=create_app(deps), client=(client, 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as h:
            results[client] = await h.get("/api/whoami", headers={"X-Forwarded-User": "dana"})
            results[client + " auth"] = (await h.get("/auth")).json()
    assert results["127.0.0.1"].json() == {"name": "dana", "kind": "proxy", "person": True}
    assert results["10.1.1.1"].status_code == 401  # the header from anyone else: ignored
    assert results["127.0.0.1 auth"] == {"token_required": False}


def test_the_identity_header_needs_pinned_proxies():
    problem = startup_problem(OpsSettings(identity_header="X-Forwarded-User"), False)
    assert "INGEST_OPS_TRUSTED_PROXIES" in str(problem)
    with pytest.raises(ValidationError, match="not an address or network"):
        OpsSettings(trusted_proxies="10.0.0.1, proxy.example")


def test_a_token_under_32_characters_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("INGEST_OPS_TOKEN", "a" * 31)
    with pytest.raises(ConfigError, match="INGEST_OPS_TOKEN") as exc:
        load_ops_settings()
    assert "a" * 31 not in str(exc.value)
    monkeypatch.setenv("INGEST_OPS_TOKEN", "a" * 32)
    assert load_ops_settings().token == SecretStr("a" * 32)


def test_insecure_local_makes_a_token_and_a_link_with_it():
    token = new_local_token()
    assert len(token) >= 32 and token != new_local_token()
    assert console_url("127.0.0.1", 8080, token) == f"http://127.0.0.1:8080/#token={token}"
    assert startup_problem(OpsSettings(token=None), True) is None
    listed = OpsSettings(token=None, allowed_hosts="ops.example")
    assert "INGEST_OPS_ALLOWED_HOSTS" in str(startup_problem(listed, True))


def test_no_credentials_and_no_insecure_local_is_refused():
    assert "INGEST_OPS_TOKEN is not set" in str(startup_problem(OpsSettings(token=None), False))
    assert startup_problem(OpsSettings(token=SecretStr("x" * 32)), False) is None


def test_ingest_run_gives_ops_a_token_of_its_own_and_prints_the_link(monkeypatch, capsys):
    from app.commands.run import _ops_local

    monkeypatch.delenv("INGEST_OPS_TOKEN", raising=False)
    monkeypatch.setenv("INGEST_OPS_PORT", "8181")
    flags, env, link = _ops_local()
    token = env["INGEST_OPS_TOKEN"]
    assert flags == ["--insecure-local", "--host", "127.0.0.1"] and len(token) >= 32
    assert link == f"http://127.0.0.1:8181/#token={token}"
    assert token not in " ".join(flags)  # in the child's environment, not its argv (ps)
    assert token not in capsys.readouterr().out  # the link is printed once all started
    monkeypatch.setenv("INGEST_OPS_TOKEN", "x" * 40)
    assert _ops_local() == ([], {}, None)
