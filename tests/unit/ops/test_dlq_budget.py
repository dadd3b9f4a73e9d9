"""The DLQ peek's byte budgets, on an in-memory log (the real broker: tests/integration/ops/
test_dlq_budget.py): the read goes newest first and stops at its budget, the answer fits
its budget whatever the text escapes to, and the settings name themselves when wrong."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from ops.dlq import DLQ_FIELDS_MAX, answer, describe, json_bytes, read_newest, record_bytes
from ops.models import DlqPeek
from ops.settings import DLQ_PEEK_MIN_BYTES, load_ops_settings
from pipeline.settings import ConfigError
from tests.unit.ops.fake_log import FakeLog

T = "ingest.dlq"
PARTS = [TopicPartition(T, p) for p in range(3)]


def _headers(reason: bytes = b"not_json") -> list[tuple[str, bytes]]:
    return [("dlq_reason", reason), ("dlq_component", b"ingress")]


async def test_the_read_goes_newest_first_and_stops_at_its_budget() -> None:
    size = 10_000
    log = FakeLog({tp: [(None, b"v" * size, _headers())] * 100 for tp in PARTS})
    budget = 250_000
    read = await read_newest(log, PARTS, log.begin, log.end, 100, budget)
    one = size + len(b"not_json") + len(b"ingress") + len("dlq_reason") + len("dlq_component")
    assert budget <= read.read_bytes <= budget + one
    assert read.read_bytes == sum(record_bytes(r) for tp in PARTS for r in log.log[tp]
                                  if (tp.partition, r.offset) in log.handed)  # fmt: skip
    for tp in PARTS:  # each partition's newest run of offsets, nothing older
        got = sorted(m["offset"] for m in read.messages if m["partition"] == tp.partition)
        assert got == list(range(100 - len(got), 100)) and got
    assert read.not_read == 300 - len(read.messages)


async def test_small_newest_records_then_big_ones_stop_inside_a_chunk() -> None:
    """The chunk size follows the biggest record seen so far; records bigger than that
    must still not carry the read past its budget by more than one record."""
    big, budget = 100_000, 1_000_000
    log = FakeLog({PARTS[0]: [b"B" * big] * 200 + [b"s"] * 100}, batch=500)
    read = await read_newest(log, PARTS[:1], log.begin, log.end, 300, budget)
    assert budget <= read.read_bytes < budget + big
    assert read.not_read == 300 - len(read.messages)
    assert read.messages[0]["offset"] == 299  # the newest first


async def test_limit_bounds_the_read_without_the_budget() -> None:
    log = FakeLog({tp: [b"v"] * 20 for tp in PARTS})
    read = await read_newest(log, PARTS, log.begin, log.end, 5, 1 << 30)
    assert sorted((m["partition"], m["offset"]) for m in read.messages) == [
        (p, o) for p in range(3) for o in range(15, 20)
    ]
    assert read.not_read == 0


NASTY = '\x01"\\</>é€😀\u2028'  # escapes to more bytes in JSON than it has as UTF-8


@pytest.mark.parametrize("max_bytes", [DLQ_PEEK_MIN_BYTES, 100_000, 1 << 20])
async def test_the_answer_fits_its_budget_as_served(max_bytes: int) -> None:
    value = (NASTY * 2000).encode()
    records = [
        ((NASTY * 100).encode(), value, [(NASTY * 50, value), *_headers(NASTY.encode())])
        for _ in range(40)
    ]
    log = FakeLog({tp: records for tp in PARTS})
    read = await read_newest(log, PARTS, log.begin, log.end, 100, 1 << 30)
    out = answer(T, read, None, max_bytes)
    served = DlqPeek.model_validate(out).model_dump_json(exclude_unset=True).encode()
    assert len(served) == json_bytes(out) <= max_bytes
    assert out["not_shown"] == 120 - len(out["messages"])
    assert out["stopped_early"] is (out["not_shown"] > 0)
    assert out["stopped_early"] is (max_bytes < 1 << 20)  # 120 fit in 1 MiB, not in 100 KB
    assert out["messages"], "the smallest budget still shows a message"
    m = out["messages"][0]
    assert len(m["key"].encode()) <= 256 and m["key_truncated"] is True
    assert len(m["value"].encode()) <= 4096 and m["truncated"] is True
    assert [h.get("value") for h in m["headers"]] == [None] * 3  # values on demand only
    assert len(m["headers"][0]["name"].encode()) <= 128 and m["headers"][0]["name_truncated"]


def test_a_worst_case_message_fits_the_smallest_budget() -> None:
    """Every shown field at its cap, in characters JSON escapes to six bytes each."""
    ctl = b"\x01"
    headers = [(k, ctl * (cap + 10)) for k, cap in DLQ_FIELDS_MAX.items()]
    headers += [("\x01" * 200, ctl) for _ in range(40)]
    log = FakeLog({PARTS[0]: [(ctl * 1000, ctl * 10_000, headers)]})
    m = describe(log.log[PARTS[0]][0])
    assert len(m["headers"]) == 16 and m["header_count"] == 44
    assert json_bytes(m) < DLQ_PEEK_MIN_BYTES - 8 * 1024  # room for the answer around it


def test_a_budget_too_small_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, bad in [
        ("INGEST_OPS_DLQ_PEEK_MAX_BYTES", "1000"),
        ("INGEST_OPS_DLQ_PEEK_READ_MAX_BYTES", "-1"),
        ("INGEST_OPS_DLQ_PEEK_MAX_BYTES", "1MiB"),
    ]:
        with monkeypatch.context() as env:
            env.setenv(name, bad)
            with pytest.raises(ConfigError, match=f"invalid setting {name}:"):
                load_ops_settings()
    cfg = load_ops_settings()
    assert (cfg.dlq_peek_max_bytes, cfg.dlq_peek_read_max_bytes) == (1 << 20, 16 << 20)
