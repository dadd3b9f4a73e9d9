"""The ops API's front door: pure ASGI middleware around the whole app (``ops.app``).

In this order, for every HTTP request, before any byte of the body is read:

1. ``Host`` must be allowed (``INGEST_OPS_ALLOWED_HOSTS``; the loopback names with the
   service's port when it binds to 127.0.0.1): 400 otherwise. DNS rebinding gets a
   page's own hostname into ``Host``, so it is refused here.
2. Every path but the static ones (the console page, ``/auth``, ``/healthz``,
   ``/readyz``, the OpenAPI schema, ``/docs`` when on) needs an identity
   (``ops.identity``): 401 without credentials, 403 with a wrong token, 429 after
   ``INGEST_OPS_AUTH_FAILURE_LIMIT`` wrong tokens from one address within a minute.
   ``OPTIONS`` (a CORS preflight carries no credentials) passes unauthenticated; the
   app answers it with no data.
3. ``POST``/``PUT``/``PATCH``/``DELETE`` must say ``Content-Type: application/json``:
   415 otherwise (a page on another origin can send only a "simple" content type
   without a CORS preflight, which this service never grants).
4. The body is read here, at most ``INGEST_OPS_MAX_BODY_BYTES``: a larger
   ``Content-Length`` answers 413 at once, a chunked body 413 as soon as it passes the
   cap. The app then reads the buffered body.

Every answer, these refusals and the app's errors included, gets the security
headers of ``ops.headers``. The identity is put in the ASGI scope under
:data:`IDENTITY` for the routes (``ops.auth.identity``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ops import headers as sec
from ops.identity import Authenticator, Identity

log = logging.getLogger(__name__)

IDENTITY = "ops.identity"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WINDOW_SECONDS = 60.0
MAX_TRACKED = 10_000  # addresses whose failures are remembered, at most


class FailedAuth:
    """Wrong tokens per client address in the last minute (bounded memory)."""

    def __init__(self, limit: int, clock: Any = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}

    def _recent(self, address: str) -> deque[float] | None:
        times = self._seen.get(address)
        if times is None:
            return None
        cutoff = self._clock() - WINDOW_SECONDS
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._seen[address]
            return None
        return times

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again (None: it may now)."""
        if self.limit <= 0:
            return None
        times = self._recent(address)
        if times is None or len(times) < self.limit:
            return None
        return max(1, int(times[0] + WINDOW_SECONDS - self._clock()) + 1)

    def failed(self, address: str) -> None:
        if self.limit <= 0:
            return
        if address not in self._seen and len(self._seen) >= MAX_TRACKED:
            for stale in list(self._seen)[: MAX_TRACKED // 10]:  # the oldest first
                self._recent(stale)
            if len(self._seen) >= MAX_TRACKED:
                self._seen.pop(next(iter(self._seen)))
        self._seen.setdefault(address, deque()).append(self._clock())


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _host_ok(host: str, allowed: frozenset[str] | None) -> bool:
    """``host`` is in ``allowed`` as given, or by a bare name there (any port)."""
    if allowed is None:
        return True
    host = host.strip().lower()
    if host in allowed:
        return True
    name = host[: host.find("]") + 1] if host.startswith("[") else host.split(":", 1)[0]
    return bool(name) and name in allowed


class Guard:
    """The middleware; ``csp`` maps a path to its policy (default: ``ops.headers.API_CSP``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: Authenticator,
        allowed_hosts: frozenset[str] | None,
        public: frozenset[str],
        max_body: int,
        csp: Mapping[str, str],
        failures: FailedAuth,
        body_caps: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.allowed_hosts = allowed_hosts
        self.public = public
        self.max_body = max_body
        # Path prefixes with a cap of their own (the codec server's /codec/: a page of
        # history payloads), instead of max_body.
        self.body_caps = dict(body_caps or {})
        self.csp = dict(csp)
        self.failures = failures
        self._too_large = f"the body is larger than {max_body} bytes (INGEST_OPS_MAX_BODY_BYTES)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the service has none: refuse before anything
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.csp.get(scope["path"], sec.API_CSP)

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": sec.add_headers(message.get("headers", []), policy),
                }
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            status, detail, extra = refusal
            await _answer(secured, status, detail, extra)
            return
        cap = self._cap(scope["path"])
        body = await _read_body(receive, cap)
        if body is None:
            await _answer(secured, 413, self._too_large_msg(cap), {})
            return
        await self.app(scope, _replay(body, receive), secured)

    def _cap(self, path: str) -> int:
        for prefix, cap in self.body_caps.items():
            if path.startswith(prefix):
                return cap
        return self.max_body

    def _too_large_msg(self, cap: int) -> str:
        if cap == self.max_body:
            return self._too_large
        return f"the body is larger than {cap} bytes"

    def _refusal(self, scope: Scope) -> tuple[int, str, dict[str, str]] | None:
        hdrs = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not _host_ok(hdrs.get("host", ""), self.allowed_hosts):
            return 400, "this Host is not served here (INGEST_OPS_ALLOWED_HOSTS)", {}
        method = scope["method"]
        if method != "OPTIONS" and scope["path"] not in self.public:
            who = self._identify(scope, hdrs)
            if not isinstance(who, Identity):
                return who
            scope[IDENTITY] = who
        if method in WRITES and _media_type(hdrs.get("content-type", "")) != "application/json":
            return 415, "send the body as Content-Type: application/json", {}
        length = hdrs.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                return 400, "Content-Length is not a number", {}
            if int(length) > (cap := self._cap(scope["path"])):
                return 413, self._too_large_msg(cap), {}
        return None

    def _identify(
        self, scope: Scope, hdrs: dict[str, str]
    ) -> Identity | tuple[int, str, dict[str, str]]:
        client = scope.get("client")
        address = client[0] if client else None
        proxied = self.auth.from_proxy(address, hdrs)
        if proxied is not None:
            return proxied
        scheme, _, given = hdrs.get("authorization", "").partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            return (
                401,
                "missing bearer token: send Authorization: Bearer <your token>",
                {"www-authenticate": "Bearer"},
            )
        key = address or "?"
        exempt = self.auth.trusted_proxy(address)  # one address for everyone behind it
        wait = None if exempt else self.failures.retry_after(key)
        if wait is not None:
            return 429, "too many wrong tokens from this address: wait", {"retry-after": str(wait)}
        who = self.auth.from_token(given)
        if who is None:
            if not exempt:
                self.failures.failed(key)
            log.info("ops API: a wrong token from %s", key)
            return 403, "invalid token", {}
        return who


async def _read_body(receive: Receive, cap: int) -> bytes | None:
    """The whole body, or None as soon as it passes ``cap`` bytes (nothing more is read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect: nothing more comes
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # http.disconnect, when the client goes

    return replay


async def _answer(send: Send, status: int, detail: str, extra: dict[str, str]) -> None:
    body = orjson.dumps({"detail": detail})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in extra.items()),
    ]
    headers.append((b"connection", b"close"))  # a body may be left unread: no reuse
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
