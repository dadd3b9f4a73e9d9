"""``ingest ops`` serves the codec server at ``/codec`` when codec keys are set, behind
the same guard as the API (a token before the body, preflights let through), with a
body cap of its own; without keys there is no ``/codec``."""

from __future__ import annotations

import base64
import os
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from ops.app import OpsDeps, create_app
from ops.codec_api import MAX_BODY_BYTES
from ops.settings import OpsSettings

TOKEN = "t" * 40
HOST = "127.0.0.1:8080"
SECRET = b'{"card":"4111-recognisable"}'
PLAIN = {
    "payloads": [
        {
            "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
            "data": base64.b64encode(SECRET).decode(),
        }
    ]
}


def _client(monkeypatch: pytest.MonkeyPatch, keys: str | None) -> httpx.AsyncClient:
    monkeypatch.delenv("INGEST_CODEC_KEYS_FILE", raising=False)
    if keys is None:
        monkeypatch.delenv("INGEST_CODEC_KEYS", raising=False)
    else:
        monkeypatch.setenv("INGEST_CODEC_KEYS", keys)
    ops = OpsSettings(token=SecretStr(TOKEN), port=8080)
    app = create_app(OpsDeps(client=None, pool=None, settings=None, ops=ops))  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}")


def _key() -> str:
    return "k1:" + base64.b64encode(os.urandom(32)).decode()


async def test_codec_routes_behind_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with _client(monkeypatch, _key()) as http:
        assert (await http.post("/codec/encode", json=PLAIN)).status_code == 401
        enc = await http.post("/codec/encode", json=PLAIN, headers=bearer)
        assert enc.status_code == 200, enc.text
        (payload,) = enc.json()["payloads"]
        assert SECRET not in base64.b64decode(payload["data"])
        dec = await http.post("/codec/decode", json=enc.json(), headers=bearer)
        assert base64.b64decode(dec.json()["payloads"][0]["data"]) == SECRET
        pre = await http.options(
            "/codec/decode",
            headers={
                "Origin": "http://localhost:8233",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
            },
        )
        assert pre.status_code in (200, 204), pre.text
        assert pre.headers["access-control-allow-origin"] == "http://localhost:8233"


async def test_the_codec_cap_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    big: Any = b'{"payloads": [], "pad": "' + b"x" * (2 << 20) + b'"}'  # over the API's 1 MiB
    async with _client(monkeypatch, _key()) as http:
        answer = await http.post("/codec/decode", content=big, headers=bearer)
        assert answer.status_code != 413, answer.text
        over = b"x" * (MAX_BODY_BYTES + 1)
        assert (await http.post("/codec/decode", content=over, headers=bearer)).status_code == 413
        assert (await http.post("/api/replay", content=big, headers=bearer)).status_code == 413


async def test_no_keys_no_codec_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _client(monkeypatch, None) as http:
        answer = await http.post(
            "/codec/encode", json=PLAIN, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert answer.status_code == 404
