"""The token providers docs/security.md gives for Confluent Cloud OAuth and Amazon MSK IAM
run as printed: each is loaded through ``KAFKA_SASL_OAUTH_TOKEN_PROVIDER`` and asked for
tokens. Confluent's talks to a local client-credentials endpoint; AWS's signer is
replaced by a stand-in with its documented signature (``generate_auth_token(region)``
-> ``(token, expiry_ms)``), as the library is not a dependency of this project."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time
import types
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from pipeline import settings
from tests.support import ROOT

DOC = ROOT / "docs" / "security.md"


@pytest.fixture(autouse=True)
def _no_kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("KAFKA_"):
            monkeypatch.delenv(name)


def _snippet(class_name: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if f"class {class_name}(" in b]
    return code


def _install(name: str, code: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(code, f"docs/security.md:{name}", "exec"), module.__dict__)
    return module


def _oauth_kafka(spec: str) -> settings.KafkaSettings:
    return settings.KafkaSettings(
        security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=spec
    )


class _TokenEndpoint(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, list[str]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _TokenEndpoint.requests.append((self.headers["Authorization"], urllib.parse.parse_qs(body)))
        answer = json.dumps({"access_token": f"tok-{len(self.requests)}", "expires_in": 3600})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def token_url() -> Iterator[str]:
    _TokenEndpoint.requests = []
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/oauth2/v1/token"
    finally:
        server.shutdown()
        server.server_close()


async def test_confluent_oauth_provider(token_url: str, monkeypatch) -> None:
    _install("doc_confluent_auth", _snippet("ConfluentOAuthTokenProvider"), monkeypatch)
    for k, v in {
        "OAUTH_TOKEN_URL": token_url,
        "OAUTH_CLIENT_ID": "client-1",
        "OAUTH_CLIENT_SECRET": "s3cret",
        "OAUTH_SCOPE": "kafka",
        "CONFLUENT_LOGICAL_CLUSTER": "lkc-abc12",
        "CONFLUENT_IDENTITY_POOL": "pool-Xy1",
    }.items():
        monkeypatch.setenv(k, v)
    kw = _oauth_kafka("doc_confluent_auth:ConfluentOAuthTokenProvider").client_kwargs()
    provider = kw["sasl_oauth_token_provider"]
    assert await provider.token() == "tok-1"  # type: ignore[attr-defined]
    assert await provider.token() == "tok-1"  # type: ignore[attr-defined]  # reused
    assert provider.extensions() == {"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy1"}  # type: ignore[attr-defined]
    ((auth, form),) = _TokenEndpoint.requests
    assert auth == "Basic " + base64.b64encode(b"client-1:s3cret").decode()
    assert form == {"grant_type": ["client_credentials"], "scope": ["kafka"]}


async def test_msk_iam_provider(monkeypatch) -> None:
    calls: list[str] = []

    class MSKAuthTokenProvider:  # the signer's documented interface
        @staticmethod
        def generate_auth_token(region: str) -> tuple[str, int]:
            calls.append(region)
            return f"signed-{len(calls)}", int((time.time() + 900) * 1000)

    signer = types.ModuleType("aws_msk_iam_sasl_signer")
    signer.MSKAuthTokenProvider = MSKAuthTokenProvider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", signer)
    _install("doc_msk_auth", _snippet("MskIamTokenProvider"), monkeypatch)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    kw = _oauth_kafka("doc_msk_auth:MskIamTokenProvider").client_kwargs()
    provider = kw["sasl_oauth_token_provider"]
    assert await provider.token() == "signed-1"  # type: ignore[attr-defined]
    assert await provider.token() == "signed-1"  # type: ignore[attr-defined]
    assert calls == ["eu-west-1"]
