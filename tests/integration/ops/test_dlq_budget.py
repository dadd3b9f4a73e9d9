"""The DLQ peek stays within its byte budget (issue 34 item 6, DESIGN convention 16).

Before the budget, a peek copied every original header in full: 300 DLQ records with
900 KB headers made each console refresh (every 3 s) read and serve about 270 MB. Here,
on the real broker and a fresh DLQ topic per test, with records carrying 900 KB headers
and 2 KB keys:

* the answer of ``GET /api/dlq`` stays under ``INGEST_OPS_DLQ_PEEK_MAX_BYTES`` and says that
  it stopped early, whether the read budget (``INGEST_OPS_DLQ_PEEK_READ_MAX_BYTES``) or
  the answer's own budget stopped it, with the newest messages first;
* keys are truncated like values, and headers are listed by name and size only;
* ``GET /api/dlq/{partition}/{offset}`` shows one record's header values (each truncated
  like a value), and answers 404 for an offset the topic does not hold.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from pipeline.settings import Settings
from tests.support.kafka import produce
from tests.support.net import free_port

from .procs import Proc, env_for

MAX_BYTES = 256 * 1024  # the answer's budget here (default 1 MiB)
READ_MAX_BYTES = 4 * 1024 * 1024  # what one peek may read (default 16 MiB)
BIG = 900_000  # bytes of the big original header of each record
KEY = 2_000  # bytes of each record's key

TOKEN = f"tok-{uuid.uuid4().hex}"


@pytest.fixture
async def http(
    cfg: Settings, temporal: Client, db_pool: asyncpg.Pool
) -> AsyncIterator[httpx.AsyncClient]:
    """The ops API with small budgets, so a few records show what 300 would."""
    ops = OpsSettings(
        host="127.0.0.1",
        port=0,
        token=SecretStr(TOKEN),
        dlq_peek_max_bytes=MAX_BYTES,
        dlq_peek_read_max_bytes=READ_MAX_BYTES,
    )
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=120) as client:
        yield client
    await server.stop()


def _headers(i: int, big: int) -> list[tuple[str, bytes]]:
    filler = (f"header of record {i} " * (big // 10 + 1)).encode()[:big]
    return [
        ("x-original-trace", filler),
        ("ce_type", b"demo.order.created"),
        ("dlq_reason", b"not_json"),
        ("dlq_detail", b"Expecting value: line 1 column 2 (char 1)"),
        ("dlq_component", b"ingress"),
        ("dlq_attempt", b"1"),
    ]


async def _dead_letter(
    cfg: Settings, n: int, *, big: int, value: bytes = b"{not json"
) -> list[tuple[int, int]]:
    """``n`` DLQ records, spread over the partitions, oldest first; (partition, offset) each."""
    return await produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.dlq_topic,
        [
            (f"k{i:04d}-".encode() + b"k" * (KEY - 6), value + b" %d" % i, _headers(i, big), i % 3)
            for i in range(n)
        ],
    )


async def _peek(http: httpx.AsyncClient, **params: Any) -> tuple[int, dict[str, Any]]:
    resp = await http.get("/api/dlq", params={"limit": 100, **params})
    assert resp.status_code == 200, resp.text[:2000]
    return len(resp.content), resp.json()


async def test_big_headers_stop_the_read_at_its_budget_and_the_answer_stays_small(
    cfg: Settings, http: httpx.AsyncClient
) -> None:
    n = 12  # 12 x 900 KB = 10.8 MB of headers: the read budget (4 MiB) stops the peek
    coords = await _dead_letter(cfg, n, big=BIG)
    served, body = await _peek(http)
    assert served <= MAX_BYTES, f"served {served:,} bytes, budget {MAX_BYTES:,}"
    assert body["stopped_early"] is True
    assert body["max_bytes"] == MAX_BYTES
    assert 0 < body["not_read"] < n and body["not_shown"] == 0
    assert body["scanned"] + body["not_read"] == n
    # The read stopped at the record that reached its budget.
    assert READ_MAX_BYTES <= body["read_bytes"] < READ_MAX_BYTES + BIG + KEY + 1000
    shown = body["messages"]
    assert len(shown) == body["scanned"] > 0
    # Newest first: the last record written to each partition is among those shown.
    newest = {p: max(o for q, o in coords if q == p) for p in range(3)}
    assert {(p, o) for p, o in newest.items()} <= {(m["partition"], m["offset"]) for m in shown}
    for m in shown:
        assert m["reason"] == "not_json" and m["component"] == "ingress"
        assert m["key_bytes"] == KEY and m["key_truncated"] is True
        assert len(m["key"].encode()) <= 256
        assert m["header_count"] == 6
        assert m["header_bytes"] > BIG
        big = m["headers"][0]
        assert big == {"name": "x-original-trace", "bytes": BIG}, big  # no value in a list
        assert all("value" not in h for h in m["headers"])


async def test_many_records_stop_the_answer_at_its_budget_newest_first(
    cfg: Settings, http: httpx.AsyncClient
) -> None:
    n = 150  # ~4.8 KB shown of each (4 KB of value, 256 B of key): 150 do not fit in 256 KiB
    value = b"{" + b"v" * 6000
    await _dead_letter(cfg, n, big=1000, value=value)
    served, body = await _peek(http)
    assert served <= MAX_BYTES, f"served {served:,} bytes, budget {MAX_BYTES:,}"
    assert body["stopped_early"] is True
    assert body["scanned"] == n and body["not_read"] == 0  # the read budget was enough
    shown = body["messages"]
    assert 0 < len(shown) < n and body["not_shown"] == n - len(shown)
    assert body["by_reason"] == {"not_json": n}  # counted over everything read
    # The newest are kept: what is shown is the most recent run of records.
    stamps = [m["timestamp_ms"] for m in shown]
    assert stamps == sorted(stamps, reverse=True)
    for m in shown:
        assert m["truncated"] is True and len(m["value"].encode()) == 4096
    # A budget that every message fits in is not reported as stopped early.
    _, few = await _peek(http, limit=2)
    assert few["stopped_early"] is False and few["not_read"] == few["not_shown"] == 0
    assert len(few["messages"]) == few["scanned"] == 6


async def test_header_values_on_demand(cfg: Settings, http: httpx.AsyncClient) -> None:
    (coord,) = await _dead_letter(cfg, 1, big=BIG)
    partition, offset = coord
    resp = await http.get(f"/api/dlq/{partition}/{offset}")
    assert resp.status_code == 200, resp.text[:2000]
    assert len(resp.content) <= MAX_BYTES
    m = resp.json()
    assert (m["partition"], m["offset"], m["reason"]) == (partition, offset, "not_json")
    assert m["stopped_early"] is False
    headers = {h["name"]: h for h in m["headers"]}
    big = headers["x-original-trace"]
    assert big["bytes"] == BIG and big["truncated"] is True
    assert big["value"].startswith("header of record 0 ") and len(big["value"].encode()) == 4096
    assert headers["ce_type"] == {
        "name": "ce_type", "bytes": 18, "truncated": False, "value": "demo.order.created"
    }  # fmt: skip
    missing = await http.get(f"/api/dlq/{partition}/{offset + 5}")
    assert missing.status_code == 404, missing.text
    assert str(offset + 5) in missing.json()["detail"]
    bad = await http.get("/api/dlq/99/0")
    assert bad.status_code == 404, bad.text


async def test_a_bad_budget_stops_ingest_ops_at_start_naming_it(cfg: Settings) -> None:
    env = env_for(cfg, INGEST_OPS_PORT=str(free_port()))
    for name, value in [
        ("INGEST_OPS_DLQ_PEEK_MAX_BYTES", "1000"),
        ("INGEST_OPS_DLQ_PEEK_READ_MAX_BYTES", "16MiB"),
    ]:
        proc = await Proc.start({**env, name: value}, "ops", "--insecure-local")
        assert await proc.stop(None) == 2, proc.text
        assert f"invalid setting {name}:" in proc.text, proc.text
