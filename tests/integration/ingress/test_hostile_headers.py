"""Hostile Kafka headers on raw records, through the real ingress (found by tests/fuzz).

* A record of about 1 MB of headers and a small value: its DLQ copy (the headers plus
  the dlq_* ones) is too large for Kafka even without its value. Ingress used to exit
  (FatalProduceError, OutOfOrderSequenceNumber) and crash-loop on it; now the copy goes
  with only its dlq_* headers (``dlq_headers_omitted``) and the next record flows.
* ``dlq_*`` headers a producer wrote: they used to become the DLQ record's source
  coordinates; the coordinates are now always the record's own.
"""

from __future__ import annotations

import asyncio
import uuid

from ingress.service import run_ingress
from ingress.settings import load_ingress_settings
from pipeline.runtime import Shutdown
from tests.support import db, kafka, wait


async def test_huge_and_spoofed_headers_are_dead_lettered_and_the_next_record_flows(cfg):
    k = cfg.kafka
    # 1,047,000 bytes of headers: the broker takes the record (1,048,588 bytes at most), not
    # its DLQ copy with the dlq_* headers added
    huge = [(f"h{i}", b"x" * 104_700) for i in range(10)]
    spoofed = [("dlq_source_offset", b"999999"), ("dlq_source_topic", b"elsewhere")]
    records = [
        (b"p", b"not json", huge),
        (b"p", b"also not json", spoofed),
        (b"p", db.event("t", f"good-{uuid.uuid4().hex[:8]}"), []),
    ]
    coords = await kafka.produce(k.bootstrap_servers, k.raw_topic, records)
    assert len({p for p, _ in coords}) == 1, "one key: one partition, in order"

    shutdown = Shutdown()
    icfg = load_ingress_settings(group=f"ing-{uuid.uuid4().hex[:8]}")
    task = asyncio.create_task(run_ingress(cfg, shutdown, config=icfg, serve=False))

    async def done() -> bool:
        return bool(await kafka.read_all(k.bootstrap_servers, k.events_topic, 300))

    try:
        await wait.eventually(done, 60, "the good record after the hostile ones")
    finally:
        shutdown.trigger()
        assert await asyncio.wait_for(task, 30) == 0, "ingress exits 0: it never crashed"
    dlq = await kafka.read_all(k.bootstrap_servers, k.dlq_topic)
    got = {}
    for m in dlq:
        hd = dict(m.headers)
        got[(int(hd["dlq_source_partition"]), int(hd["dlq_source_offset"]))] = (m, hd)
    assert set(got) == set(coords[:2]), "each at its own coordinates, spoofed ones ignored"
    first, hd = got[coords[0]]
    assert hd["dlq_reason"] == b"not_json", hd
    assert hd.get("dlq_headers_omitted") == b"1", sorted(hd)
    assert first.value is None and not any(n.startswith("h") for n in hd)
    second, hd2 = got[coords[1]]
    assert hd2["dlq_source_topic"] == k.raw_topic.encode()
    assert second.value == b"also not json"
