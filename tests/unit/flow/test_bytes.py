"""Bytes as Temporal counts them, the batch byte budget, and what a run can carry
(``schemas.flow.spec``; issue 34, item 5)."""

from __future__ import annotations

import json
import uuid

import pytest

from definitions.files import FileError, parse
from schemas.converter import DATA_CONVERTER
from schemas.flow.spec import (
    BLOB_LIMIT,
    WINDOW_MAX_BYTES,
    BatchDef,
    batch_budget,
    json_bytes,
    run_bytes,
    run_fits,
)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "t", "event_id": "e-1", "data": {"n": 1, "ok": True, "x": None, "f": 1.5}},
        {"type": "t", "data": {"name": "привет", "cjk": "数据", "emoji": "🙂", "q": 'a"b\\c'}},
        {"type": "t", "data": {"nested": [{"a": [1, 2, {"b": "é" * 50}]}]}},
    ],
)
def test_json_bytes_is_the_length_of_the_payload_temporal_is_sent(event):
    (payload,) = DATA_CONVERTER.payload_converter.to_payloads([event])
    assert json_bytes(event) == len(payload.data)


def test_non_ascii_text_counts_up_to_three_times_its_utf8_size():
    text = "привет" * 1000  # 2 bytes a character in UTF-8, 6 escaped
    assert len(text.encode()) == 12_000
    assert json_bytes(text) == 36_002


def test_the_budget_is_shared_by_the_tasks_and_capped_by_max_bytes():
    assert WINDOW_MAX_BYTES == 1_500_000 < BLOB_LIMIT == 2_097_152
    assert batch_budget(None, 1) == 1_500_000
    assert batch_budget(None, 0) == 1_500_000  # an activity without tasks carries one copy
    assert batch_budget(None, 3) == 500_000
    assert batch_budget(200_000, 1) == 200_000
    assert batch_budget(800_000, 3) == 500_000  # never over the shared budget
    # many tasks: what a run can carry is the tighter bound (2,097 bytes a task, less
    # 1,024 of overhead), and the tasks' own payloads count
    assert batch_budget(None, 1000) == 1_073
    assert batch_budget(None, 1, own=1_000_000) == 1_096_128
    assert batch_budget(None, 1, own=3_000_000) == 0  # nothing fits: every batch is too large


def test_run_fits_agrees_with_what_the_dev_server_ran():
    # measured: 2 tasks x a 1,000,447-byte event ran (a 2,001,390-byte plan);
    # 3 tasks x a 700,447-byte event never did (a 2,101,915-byte plan)
    assert run_fits(2, 1_000_447)
    assert not run_fits(3, 700_447)
    assert run_bytes(3, 700_447) > 2_101_915 > BLOB_LIMIT
    # a full batch of its budget always fits, whatever the tasks
    for n in (1, 2, 3, 7, 100, 1000):
        for own in (0, 50_000, 1_000_000):
            assert run_fits(n, batch_budget(None, n, own), own), (n, own)


def _file(batch: dict[str, object]) -> str:
    act = {
        "id": str(uuid.uuid4()),
        "name": "batched",
        "trigger": {"type": "event", "event_type": "t"},
        "tasks": [{"type": "noop"}],
        "flow": {"batch": batch},
    }
    return json.dumps({"activities": [act]})


def test_max_bytes_is_optional_and_bounded_by_the_budget():
    ok = parse(_file({"max_size": 10, "timeout": "5s", "max_bytes": 250_000}), ".json")
    flow = ok.activities[0].flow
    assert flow is not None and flow.batch == BatchDef(max_size=10, timeout=5, max_bytes=250_000)
    assert BatchDef(max_size=10, timeout=5).max_bytes is None
    with pytest.raises(FileError) as info:
        parse(_file({"max_size": 10, "timeout": "5s", "max_bytes": 2_000_000}), ".json")
    assert info.value.problems == [
        "activities[0].flow.batch.max_bytes: Input should be less than or equal to 1500000"
    ]
