"""One event size limit for both sides of the events topic: what ingress forwards, the router takes.

Ingress's real transform and the router's real planner, with the limit each loads
from the environment. Stamping grows an event (an ``event_id`` spliced in, or a
re-serialised envelope), so ingress must check what it sends, not what it read.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from ingress.records import Outgoing, transform
from ingress.settings import load_ingress_settings
from pipeline.settings import ConfigError
from router.catalog import ActivityCatalog
from router.routing import RoutePlanner
from router.settings import load_router_settings
from schemas.envelope import MAX_EVENT_BYTES, R_TOO_LARGE
from tests.unit.ingress.helpers import record

CE_BINARY = [
    ("ce_specversion", b"1.0"),
    ("ce_id", b"big-1"),
    ("ce_source", b"/big"),
    ("ce_type", b"t"),
]


def plain(pad: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Our JSON form without an event_id (ingress stamps one in)."""
    return orjson.dumps({"type": "t", "source": "s", "data": {"pad": "x" * pad}}), []


def binary_text(pad: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    """A CloudEvent in binary mode with a text body: re-serialised as a JSON string,
    each ``"`` escaped, so it grows by much more than an id."""
    return b'"' * pad, CE_BINARY


Body = Callable[[int], tuple[bytes, list[tuple[str, bytes]]]]


def _ingress(body: Body, pad: int, max_bytes: int) -> tuple[int, Outgoing]:
    value, headers = body(pad)
    msg = record(value, headers=headers, topic="raw", partition=0, offset=pad)
    out = transform(msg, strategy=load_ingress_settings().stamping(), events_topic="ev",
                    dlq_topic="dlq", max_bytes=max_bytes)  # fmt: skip
    return len(value), out


def _router_reason(out: Outgoing, max_bytes: int) -> str | None:
    planner = RoutePlanner(ActivityCatalog(pool=None), max_bytes)  # type: ignore[arg-type]
    return planner.plan(record(out.value, key=out.key, headers=out.headers, topic="ev")).dlq_reason


def _stamped_size(body: Body, pad: int) -> int:
    _, out = _ingress(body, pad, 100 * MAX_EVENT_BYTES)
    assert out.reason is None and out.value is not None
    return len(out.value)


def _largest_fitting_pad(body: Body, size: int) -> int:
    """The largest padding whose stamped event is at most ``size`` bytes (binary search)."""
    low, high = 0, size  # stamped(0) fits; stamped(size) does not: stamping only adds
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if _stamped_size(body, mid) <= size else (low, mid)
    return low


@pytest.mark.parametrize(
    ("limit", "body"),
    [
        (5_000, plain),  # the fast path (a plain body forwarded with the id spliced in)
        (None, plain),  # the default limit: the full path (parse, stamp, re-serialise)
        (5_000, binary_text),  # a CloudEvent that grows by a factor, not by an id
    ],
)
def test_an_event_ingress_forwards_is_never_too_large_for_the_router(
    monkeypatch: pytest.MonkeyPatch, limit: int | None, body: Body
) -> None:
    monkeypatch.delenv("INGEST_MAX_EVENT_BYTES", raising=False)
    if limit is not None:
        monkeypatch.setenv("INGEST_MAX_EVENT_BYTES", str(limit))
    max_bytes = load_ingress_settings().max_event_bytes
    assert load_router_settings().max_event_bytes == max_bytes == (limit or MAX_EVENT_BYTES)

    at_limit = _largest_fitting_pad(body, max_bytes)
    assert _stamped_size(body, at_limit) > max_bytes - 3  # the boundary, within a step
    for pad in (at_limit - 1, at_limit, at_limit + 1):
        raw_size, out = _ingress(body, pad, max_bytes)
        assert raw_size <= max_bytes  # every one passes the raw size check
        assert out.value is not None
        if out.reason is None:  # forwarded: the router takes it
            assert len(out.value) <= max_bytes
            assert _router_reason(out, max_bytes) is None
        else:  # refused by ingress, before the events topic, with the original bytes
            assert (out.reason, out.topic, pad) == (R_TOO_LARGE, "dlq", at_limit + 1)
            assert dict(out.headers)["dlq_detail"].startswith(b"stamped ")
            assert out.value == body(pad)[0]


def test_the_issue_case_a_999990_byte_event_without_an_id(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("INGEST_MAX_EVENT_BYTES", raising=False)
    max_bytes = load_ingress_settings().max_event_bytes
    value, _ = plain(0)
    value, _ = plain(999_990 - len(value))
    assert len(value) == 999_990
    out = transform(record(value), strategy=load_ingress_settings().stamping(),
                    events_topic="ev", dlq_topic="dlq", max_bytes=max_bytes)  # fmt: skip
    assert (out.topic, out.reason) == ("dlq", R_TOO_LARGE)  # refused by ingress, not the router


def test_the_router_limit_is_the_one_ingress_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_MAX_EVENT_BYTES", "4321")
    assert load_router_settings().max_event_bytes == load_ingress_settings().max_event_bytes == 4321
    # Its old router-only name is refused with one line, not silently ignored.
    monkeypatch.setenv("INGEST_ROUTER_MAX_EVENT_BYTES", "999")
    with pytest.raises(ConfigError, match="INGEST_ROUTER_MAX_EVENT_BYTES is no longer read"):
        load_router_settings()
