"""The codec server: Temporal's remote codec protocol over the project's payload codec.

``codec_router(codec, allowed_origins)`` answers ``POST /encode`` and ``POST /decode``
(also as ``/{namespace}/encode`` and ``/{namespace}/decode``, the form that a
``{namespace}`` in ``temporal --codec-endpoint`` or the UI's endpoint gives). The body
of each, asked and answered, is ``temporal.api.common.v1.Payloads`` in protobuf's JSON
form: ``{"payloads": [{"metadata": {"encoding": "<base64>"}, "data": "<base64>"}]}``.
The ``X-Namespace`` header the UI and CLI send is accepted and not needed: one key set
serves every namespace.

CORS: the Temporal UI calls from the browser, with ``Content-Type: application/json``
and ``X-Namespace`` (and ``Authorization`` when the UI passes its access token), so the
browser sends a preflight first. ``OPTIONS`` answers it for an allowed origin
(``INGEST_CODEC_CORS_ORIGINS``, exact match) with those headers, credentials allowed
(the UI's "include cross-origin credentials"), and without authentication: a preflight
never carries credentials, so whatever authenticates the ``POST`` routes (``auth``
here, or the ops service's middleware) must let ``OPTIONS`` through. A ``POST`` whose
``Origin`` is not allowed is refused (403); one without ``Origin`` (the CLI) is not a
browser's and passes to authentication.

Errors answer ``{"detail": ...}``: 400 for a body that is not ``Payloads`` JSON or a
payload the codec cannot open (the detail names the key id, never payload bytes), 413
past ``max_body_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from pipeline.codec import build_codec
from pipeline.codec_keys import CodecSettings

ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"
MAX_BODY_BYTES = 16 << 20  # a page of history the UI decodes at once stays far below


def codec_router(
    codec: PayloadCodec,
    allowed_origins: Sequence[str],
    *,
    auth: Callable[..., Any] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> APIRouter:
    """The codec server's routes. ``auth``: a FastAPI dependency run on ``POST`` only
    (the ops service passes None: :class:`ops.guard.Guard` authenticates every request
    but ``OPTIONS`` before the routes see it); preflights must stay unauthenticated."""
    origins = frozenset(allowed_origins)
    router = APIRouter(tags=["codec"])
    post_deps = [Depends(auth)] if auth is not None else []

    def cors(request: Request) -> dict[str, str]:
        origin = request.headers.get("origin")
        if origin is None or origin not in origins:
            return {}
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Credentials": "true",
            "Vary": "Origin",
        }

    async def preflight(request: Request) -> Response:
        headers = cors(request)
        if not headers:
            return Response(status_code=403, headers={"Vary": "Origin"})
        headers.update(
            {
                "Access-Control-Allow-Methods": "POST, OPTIONS",
                "Access-Control-Allow-Headers": ALLOWED_HEADERS,
                "Access-Control-Max-Age": "600",
            }
        )
        if request.headers.get("access-control-request-private-network") == "true":
            headers["Access-Control-Allow-Private-Network"] = "true"
        return Response(status_code=204, headers=headers)

    def handler(decode: bool) -> Callable[[Request], Any]:
        async def convert(request: Request) -> Response:
            headers = cors(request)
            if "origin" in request.headers and not headers:
                return _error(403, "origin not allowed: add it to INGEST_CODEC_CORS_ORIGINS", {})
            body = await request.body()
            if len(body) > max_body_bytes:
                return _error(413, f"body larger than {max_body_bytes} bytes", headers)
            payloads = Payloads()
            try:
                json_format.Parse(body or b"{}", payloads, ignore_unknown_fields=True)
            except (json_format.ParseError, UnicodeDecodeError, ValueError):
                return _error(400, 'body is not {"payloads": [...]} in protobuf JSON', headers)
            try:
                if decode:
                    out = await codec.decode(payloads.payloads)
                else:
                    out = await codec.encode(payloads.payloads)
            except Exception as exc:  # the codec's own message names the key id, no bytes
                return _error(400, f"{'decode' if decode else 'encode'} failed: {exc}", headers)
            answer = json_format.MessageToDict(Payloads(payloads=out))
            return JSONResponse({"payloads": answer.get("payloads", [])}, headers=headers)

        return convert

    for action, decode in (("encode", False), ("decode", True)):
        for path in (f"/{action}", f"/{{namespace}}/{action}"):
            router.add_api_route(
                path,
                handler(decode),
                methods=["POST"],
                dependencies=post_deps,
                include_in_schema=path == f"/{action}",
                summary=f"{action} Temporal payloads (remote codec protocol)",
            )
            router.add_api_route(path, preflight, methods=["OPTIONS"], include_in_schema=False)
    return router


def configured_codec_router(
    cfg: CodecSettings, *, auth: Callable[..., Any] | None = None
) -> APIRouter | None:
    """:func:`codec_router` over the codec ``cfg`` configures (``INGEST_CODEC_*``, the same
    keys as the process's Temporal client), for ``cfg``'s CORS origins; None when no key
    is set (there is nothing to decode). Raises ``ConfigError`` naming a bad setting."""
    codec = build_codec(cfg)
    return None if codec is None else codec_router(codec, cfg.origins(), auth=auth)


def _error(status: int, detail: str, headers: dict[str, str]) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)
