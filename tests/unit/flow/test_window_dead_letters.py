"""A window no run can take (``workers.flow``; issue 34, item 5): the DLQ record of
each member, and which start failures dead-letter a window and which are retried."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from temporalio.service import RPCError, RPCStatusCode

from pipeline import metrics
from schemas.flow.io import CloseWindowInput
from schemas.workflow_io import RunActivityInput
from workers.flow import window_activities as activities
from workers.flow import window_dead_letters as dead_letters
from workers.flow.window_activities import FlowWindowActivities, Frozen

MEMBER = {
    "event_id": "e-7",
    "event": '{"type": "t", "event_id": "e-7", "data": {"name": "жёлтый"}}',
    "source_topic": "ingest.events",
    "source_partition": 2,
    "source_offset": 41,
}


def test_a_member_record_names_its_source_and_keeps_the_event():
    rec = dead_letters.record(MEMBER, 12, "ingest.dlq", "window_start_refused", "INVALID_ARGUMENT")
    assert (rec.id, rec.topic, rec.key) == ("flow-dlq:12:e-7", "ingest.dlq", b"e-7")
    assert orjson.loads(rec.body) == {"type": "t", "event_id": "e-7", "data": {"name": "жёлтый"}}
    assert b" " not in rec.body  # compact, as the router read it
    assert list(rec.headers) == [
        ("dlq_reason", b"window_start_refused"),
        ("dlq_detail", b"INVALID_ARGUMENT"),
        ("dlq_component", b"worker"),
        ("dlq_source_topic", b"ingest.events"),
        ("dlq_source_partition", b"2"),
        ("dlq_source_offset", b"41"),
        ("dlq_attempt", b"1"),
        ("dlq_window_id", b"12"),
    ]


def test_a_member_without_coordinates_and_a_long_detail_still_make_a_record():
    member = {**MEMBER, "source_topic": None, "source_partition": None, "source_offset": None}
    detail = "é" * 2000  # 4,000 bytes: cut to 1 KiB on a character boundary
    rec = dead_letters.record(member, 1, "dlq", "window_too_large", detail)
    headers = dict(rec.headers)
    assert headers["dlq_detail"] == ("é" * 512).encode()
    assert [headers[f"dlq_source_{k}"] for k in ("topic", "partition", "offset")] == [
        b"",
        b"-1",
        b"-1",
    ]
    for _, value in rec.headers:
        value.decode()  # every value valid UTF-8: the outbox stores them as JSON text


def _count(reason: str) -> float:
    return metrics.DLQ_MESSAGES.labels(component="worker", reason=reason)._value.get()  # type: ignore[attr-defined]


class _Client:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def start_workflow(self, *args: Any, **kwargs: Any) -> None:
        raise self.error


INP = CloseWindowInput("00000000-0000-0000-0000-000000000001", "k", 5, "timeout")
RUN = RunActivityInput.for_window(INP.activity_id, "batch", "k", [("e-1", {"type": "t"})], "full")


def _acts(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, frozen: Frozen
) -> tuple[FlowWindowActivities, list[str]]:
    """The activities over a fake pool and a client whose start raises ``error``, with
    ``freeze`` answering ``frozen``; the dead-letterings they asked for."""
    refused: list[str] = []

    async def freeze(pool: Any, inp: CloseWindowInput, dlq_topic: str) -> Frozen:
        assert dlq_topic == "ingest.dlq"
        return frozen

    async def dead_letter(conn: Any, window_id: int, topic: str, reason: str, detail: str) -> int:
        refused.append(f"{window_id} {reason} {detail}")
        return 3

    class _Pool:
        def acquire(self) -> Any:
            return _Conn()

    class _Conn:
        async def __aenter__(self) -> _Conn:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        def transaction(self) -> _Conn:
            return self

        async def execute(self, *args: Any) -> None:
            return None

    monkeypatch.setattr(activities, "freeze", freeze)
    monkeypatch.setattr(dead_letters, "dead_letter", dead_letter)
    acts = FlowWindowActivities(_Pool(), _Client(error), "tq", "ingest.dlq")  # type: ignore[arg-type]
    return acts, refused


async def test_a_start_refused_for_good_dead_letters_the_window(monkeypatch):
    error = RPCError("Blob data size exceeds limit.", RPCStatusCode.INVALID_ARGUMENT, b"")
    acts, refused = _acts(monkeypatch, error, Frozen("closed", RUN, 1))
    before = _count("window_start_refused")
    result = await acts.close_window(INP)
    assert (result.outcome, result.workflow_id, result.size) == (
        "dead_lettered",
        RUN.workflow_id,
        3,
    )
    assert refused == [
        f"5 window_start_refused start of {RUN.workflow_id} refused:"
        " INVALID_ARGUMENT: Blob data size exceeds limit."
    ]
    assert _count("window_start_refused") == before + 3


async def test_an_outage_is_raised_for_temporal_to_retry(monkeypatch):
    error = RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
    acts, refused = _acts(monkeypatch, error, Frozen("closed", RUN, 1))
    with pytest.raises(RPCError):
        await acts.close_window(INP)
    assert refused == []


async def test_a_window_no_run_can_carry_is_answered_and_counted(monkeypatch):
    error = AssertionError("no start may be tried")
    acts, _ = _acts(monkeypatch, error, Frozen("dead_lettered", None, 4, "3 tasks each carry ..."))
    before = _count("window_too_large")
    result = await acts.close_window(INP)
    assert (result.outcome, result.size) == ("dead_lettered", 4)
    assert _count("window_too_large") == before + 4
    # a repeat that finds the window dead-lettered before counts nothing
    acts, _ = _acts(monkeypatch, error, Frozen("dead_lettered"))
    result = await acts.close_window(INP)
    assert (result.outcome, result.size) == ("dead_lettered", 0)
    assert _count("window_too_large") == before + 4
