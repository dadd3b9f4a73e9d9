"""The stack's Jaeger for tests: the session fixture ``jaeger`` and its client.

``jaeger`` starts the stack's Jaeger (``devstack.jaeger``, as ``ingest stack up
--tracing`` does; built once on first use) unless it answers, leaves it running like
the rest of the stack, and returns a :class:`JaegerClient` on its query API. A test
module asks for it by binding it at module level (an import of the name would be
shadowed by each test's parameter, which ruff reports as F811)::

    from tests.support import jaeger as support
    jaeger = support.jaeger

Nothing here reads a failure as "no data": an HTTP error, an error in Jaeger's JSON
envelope, or a trace that is not there raises :class:`JaegerError`, and
:meth:`JaegerClient.wait_trace` fails with what it last saw.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from devstack.jaeger import Jaeger, otlp_grpc_endpoint, otlp_http_endpoint, query_url
from devstack.settings import StackSettings

from tests.support import ROOT

Trace = dict[str, Any]


class JaegerError(Exception):
    """The query API failed, or answered with errors (a trace it does not have, too)."""


class TraceNotFound(JaegerError):
    """Jaeger answered 404 for the trace: not (yet) stored."""


@dataclass(frozen=True)
class JaegerClient:
    ui_url: str  # the query service: the page at /, the API under /api/
    otlp_endpoint: str  # OTLP/HTTP, as OTEL_EXPORTER_OTLP_ENDPOINT (exporters add /v1/traces)
    otlp_grpc_endpoint: str

    def _get(self, path: str) -> Any:
        url = f"{self.ui_url}{path}"
        try:
            res = httpx.get(url, timeout=10)
        except httpx.HTTPError as exc:
            raise JaegerError(f"GET {url}: {exc!r}") from exc
        try:
            body = res.json()
        except ValueError:
            raise JaegerError(
                f"GET {url}: {res.status_code}, not JSON: {res.text[:200]!r}"
            ) from None
        errors = body.get("errors") if isinstance(body, dict) else None
        if res.status_code == 404:
            raise TraceNotFound(f"GET {url}: 404 {errors}")
        if res.status_code != 200 or errors:
            raise JaegerError(f"GET {url}: {res.status_code} {errors or res.text[:200]!r}")
        if not isinstance(body, dict) or "data" not in body:
            raise JaegerError(f"GET {url}: no 'data' in {str(body)[:200]!r}")
        return body["data"]

    def services(self) -> list[str]:
        """Every service name Jaeger holds spans of (``[]`` only when it holds none)."""
        data = self._get("/api/services")
        if data is None:  # a Jaeger with no spans at all answers null
            return []
        if not isinstance(data, list):
            raise JaegerError(f"/api/services: data is {data!r}, not a list")
        return sorted(data)

    def trace(self, trace_id: str) -> Trace:
        """The trace ``trace_id`` (32 hex digits): ``{"traceID", "spans", "processes"}``.

        Raises :class:`TraceNotFound` when Jaeger does not have it."""
        if len(trace_id) != 32 or any(c not in "0123456789abcdef" for c in trace_id):
            raise ValueError(f"{trace_id!r} is not a trace id of 32 lower-case hex digits")
        data = self._get(f"/api/traces/{trace_id}")
        if not isinstance(data, list) or len(data) != 1:
            raise JaegerError(f"trace {trace_id}: expected one trace, got {str(data)[:300]!r}")
        found: Trace = data[0]
        if int(str(found.get("traceID") or "0"), 16) != int(trace_id, 16):
            raise JaegerError(f"asked for trace {trace_id}, got {found.get('traceID')!r}")
        return found

    def find_traces(self, service: str, limit: int = 20, lookback: str = "1h") -> list[Trace]:
        """The newest traces (at most ``limit``) with a span of ``service``."""
        query = f"/api/traces?service={quote(service)}&limit={limit}&lookback={lookback}"
        data = self._get(query)
        if not isinstance(data, list):
            raise JaegerError(f"{query}: data is {str(data)[:200]!r}, not a list")
        return data

    def wait_trace(
        self, trace_id: str, predicate: Callable[[Trace], bool], timeout: float = 30
    ) -> Trace:
        """Poll :meth:`trace` until ``predicate(trace)`` holds; AssertionError with what it
        last saw (the trace, or the error) when ``timeout`` runs out. Errors other than
        "not found" raise at once."""
        deadline = time.monotonic() + timeout
        last: str = "nothing yet"
        while True:
            try:
                found = self.trace(trace_id)
            except TraceNotFound as exc:
                last = str(exc)
            else:
                if predicate(found):
                    return found
                last = f"{len(found['spans'])} spans: {summary(found)}"
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"trace {trace_id} did not satisfy the predicate within {timeout:.0f}s; "
                    f"last seen: {last}"
                )
            time.sleep(0.25)


def spans(trace: Trace) -> list[dict[str, Any]]:
    return list(trace["spans"])


def service_of(trace: Trace, span: dict[str, Any]) -> str:
    """The service name of ``span`` (its process's ``serviceName``)."""
    return str(trace["processes"][span["processID"]]["serviceName"])


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def summary(trace: Trace) -> list[str]:
    """``["service: operation", ...]``, for failure messages."""
    return [f"{service_of(trace, s)}: {s['operationName']}" for s in spans(trace)]


def stack_jaeger() -> JaegerClient:
    """Start the stack's Jaeger unless it answers; its client."""
    cfg = StackSettings(dir=ROOT / ".stack", tracing=True)
    Jaeger(cfg).ensure()  # a StackError says why it could not
    return JaegerClient(
        ui_url=query_url(cfg),
        otlp_endpoint=otlp_http_endpoint(cfg),
        otlp_grpc_endpoint=otlp_grpc_endpoint(cfg),
    )


@pytest.fixture(scope="session")
def jaeger() -> Iterator[JaegerClient]:
    if os.environ.get("INGEST_TEST_NO_STACK"):  # make test-unit: no service at all
        pytest.fail("this test needs the stack's Jaeger; make test-unit runs without one")
    yield stack_jaeger()
