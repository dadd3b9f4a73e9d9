"""The codec server's routes (``ops/codec_api.py``) in a small FastAPI app, over httpx's
ASGI transport: Temporal's remote codec protocol, CORS for the UI, auth on POST only."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request

from ops.codec_api import codec_router, configured_codec_router
from pipeline.codec import EncryptionCodec
from pipeline.codec_keys import CodecKey, CodecSettings

UI = "http://localhost:8233"
SECRET = b'{"card":"4111-recognisable"}'


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


PLAIN = {"payloads": [{"metadata": {"encoding": _b64(b"json/plain")}, "data": _b64(SECRET)}]}


def _guard(request: Request) -> None:
    if request.headers.get("authorization") != "Bearer right":
        raise HTTPException(401, "no")


def _app(codec: EncryptionCodec, *, auth: bool = False) -> FastAPI:
    app = FastAPI()
    router = codec_router(codec, [UI, "http://127.0.0.1:8233"], auth=_guard if auth else None)
    app.include_router(router, prefix="/codec")
    return app


@pytest.fixture
def codec() -> EncryptionCodec:
    return EncryptionCodec([CodecKey("k1", os.urandom(32))])


@pytest.fixture
async def http(codec: EncryptionCodec) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app(codec))
    async with httpx.AsyncClient(transport=transport, base_url="http://codec") as client:
        yield client


async def test_encode_then_decode_in_protobuf_json(http: httpx.AsyncClient) -> None:
    enc = await http.post("/codec/encode", json=PLAIN)
    assert enc.status_code == 200
    (payload,) = enc.json()["payloads"]
    assert base64.b64decode(payload["metadata"]["encoding"]) == b"binary/encrypted"
    assert base64.b64decode(payload["metadata"]["encryption-key-id"]) == b"k1"
    assert SECRET not in base64.b64decode(payload["data"])
    dec = await http.post("/codec/decode", json=enc.json(), headers={"X-Namespace": "default"})
    assert dec.status_code == 200
    assert dec.json() == PLAIN


async def test_the_namespace_path_form_is_served(http: httpx.AsyncClient) -> None:
    enc = (await http.post("/codec/ingest-test/encode", json=PLAIN)).json()
    assert (await http.post("/codec/ingest-test/decode", json=enc)).json() == PLAIN


async def test_plain_payloads_and_empty_bodies_pass(http: httpx.AsyncClient) -> None:
    assert (await http.post("/codec/decode", json=PLAIN)).json() == PLAIN
    assert (await http.post("/codec/decode", json={"payloads": []})).json() == {"payloads": []}


async def test_preflight_for_the_ui_origin(http: httpx.AsyncClient) -> None:
    resp = await http.options(
        "/codec/decode",
        headers={
            "Origin": UI,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
        },
    )
    assert resp.status_code == 204
    assert resp.headers["access-control-allow-origin"] == UI
    assert resp.headers["access-control-allow-credentials"] == "true"
    allowed = {h.strip().lower() for h in resp.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "x-namespace", "authorization"} <= allowed
    assert "POST" in resp.headers["access-control-allow-methods"]
    assert "access-control-allow-private-network" not in resp.headers


async def test_private_network_preflight(http: httpx.AsyncClient) -> None:
    resp = await http.options(
        "/codec/ns/decode",
        headers={"Origin": UI, "Access-Control-Request-Private-Network": "true"},
    )
    assert resp.headers["access-control-allow-private-network"] == "true"


async def test_other_origins_get_no_cors(http: httpx.AsyncClient) -> None:
    pre = await http.options("/codec/decode", headers={"Origin": "https://evil.example"})
    assert pre.status_code == 403
    assert "access-control-allow-origin" not in pre.headers
    post = await http.post("/codec/decode", json=PLAIN, headers={"Origin": "https://evil.example"})
    assert post.status_code == 403
    assert "access-control-allow-origin" not in post.headers
    ok = await http.post("/codec/decode", json=PLAIN, headers={"Origin": UI})
    assert ok.headers["access-control-allow-origin"] == UI
    assert ok.headers["vary"] == "Origin"


async def test_auth_guards_post_but_not_the_preflight(codec: EncryptionCodec) -> None:
    transport = httpx.ASGITransport(app=_app(codec, auth=True))
    async with httpx.AsyncClient(transport=transport, base_url="http://codec") as http:
        assert (await http.post("/codec/encode", json=PLAIN)).status_code == 401
        ok = await http.post("/codec/encode", json=PLAIN, headers={"Authorization": "Bearer right"})
        assert ok.status_code == 200
        pre = await http.options("/codec/encode", headers={"Origin": UI})
        assert pre.status_code == 204


async def test_unknown_key_id_is_named(http: httpx.AsyncClient) -> None:
    other = EncryptionCodec([CodecKey("retired-2024", os.urandom(32))])
    transport = httpx.ASGITransport(app=_app(other))
    async with httpx.AsyncClient(transport=transport, base_url="http://o") as elsewhere:
        enc = (await elsewhere.post("/codec/encode", json=PLAIN)).json()
    resp = await http.post("/codec/decode", json=enc)
    assert resp.status_code == 400
    assert "retired-2024" in resp.json()["detail"]
    assert "4111" not in resp.text


async def test_bad_bodies(http: httpx.AsyncClient) -> None:
    bad = await http.post(
        "/codec/decode", content=b"not json", headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 400
    wrong = await http.post("/codec/decode", json={"payloads": "nope"})
    assert wrong.status_code == 400


async def test_body_cap(codec: EncryptionCodec) -> None:
    app = FastAPI()
    app.include_router(codec_router(codec, [UI], max_body_bytes=100))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as http:
        big = {"payloads": [{"data": _b64(b"x" * 200)}]}
        assert (await http.post("/encode", json=big)).status_code == 413


def test_configured_router_only_with_keys() -> None:
    assert configured_codec_router(CodecSettings()) is None
    key = base64.b64encode(os.urandom(32)).decode()
    router = configured_codec_router(CodecSettings(keys=f"k:{key}"))  # type: ignore[arg-type]
    assert router is not None
    paths = {getattr(r, "path", None) for r in router.routes}
    assert {"/encode", "/decode", "/{namespace}/decode"} <= paths
