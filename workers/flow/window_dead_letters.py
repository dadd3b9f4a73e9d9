"""A window no run can take: every member to the DLQ, through the outbox, once.

Two reasons (``dlq_reason``, stable, in docs/flow-control.md):

* ``window_too_large``: the run would carry more than Temporal takes. Its plan holds the
  window's events once per task (``schemas.flow.spec.run_fits``), and a plan over the limit is
  never refused once: the run would stay ``running`` for ever. Decided once, when the
  window is first frozen, before any start.
* ``window_start_refused``: Temporal refused the start for good (a ``StartRejected``,
  or any non-outage ``RPCError``: a server whose blob limit is below the SDK's, an
  argument it finds invalid); the error is the record's ``dlq_detail``.

Each member becomes one DLQ record: the event as the router read it (its JSON envelope)
as the value, its event id as the key, and the headers of ``pipeline.kafka.dlq_headers``
with the member's source coordinates (``flow_members``), ``dlq_component=worker`` and
``dlq_window_id``. The record's original key and headers are not kept (a window stores
the envelope only). ``ingest replay --dlq`` routes it again, as any router dead letter.

The worker has no Kafka producer of its own: the records are outbox rows
(``workers.store.put_outbox``) written in the transaction that marks the window
``dead_lettered`` and deletes its members, under the key's advisory lock, and ``ingest
relay`` publishes them. So a retried ``close_window`` writes nothing twice (the row id
is :func:`dlq_id`, and the window is no longer ``closed``), and a crash loses nothing.
The members are deleted so that a re-driven record is assigned to a new window instead
of being absorbed into the dead one. A window's events are counted in
``pipeline_dlq_messages_total{component="worker", reason}`` once that transaction commits.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
from aiokafka.structs import ConsumerRecord

from pipeline import kafka, metrics
from workers.store import OutboxMessage, put_outbox

COMPONENT = "worker"  # dlq_component, and the component label of the DLQ counter
R_WINDOW_TOO_LARGE = "window_too_large"
R_WINDOW_START_REFUSED = "window_start_refused"
DLQ_REASONS = (R_WINDOW_TOO_LARGE, R_WINDOW_START_REFUSED)
H_WINDOW_ID = "dlq_window_id"
DEAD_LETTERED = "dead_lettered"  # flow_windows.state, and close_window's outcome
DETAIL_MAX_BYTES = 1024  # dlq_detail's cap (pipeline.kafka.dlq_headers)

MEMBERS_SQL = (
    "SELECT event_id, event, source_topic, source_partition, source_offset"
    " FROM flow_members WHERE window_id = $1 ORDER BY position"
)


def start_metrics_at_zero() -> None:
    """The worker's window dead-letter series, at 0 from the start (convention 11)."""
    metrics.start_at_zero(metrics.DLQ_MESSAGES, component=[COMPONENT], reason=DLQ_REASONS)


def dlq_id(window_id: int, event_id: str) -> str:
    """``flow-dlq:{window_id}:{event_id}``: the outbox id (dedupe id) of one member's DLQ
    record. Never change the format: a retried close would write a second record. Per
    window, so an event re-driven into a new window that is dead-lettered again gets a
    record of its own."""
    return f"flow-dlq:{window_id}:{event_id}"


def clip(detail: str) -> str:
    """``detail`` cut to :data:`DETAIL_MAX_BYTES` of UTF-8 on a character boundary (an
    outbox header value must stay valid UTF-8)."""
    return detail.encode("utf-8", "replace")[:DETAIL_MAX_BYTES].decode("utf-8", "ignore")


def record(member: Any, window_id: int, dlq_topic: str, reason: str, detail: str) -> OutboxMessage:
    """The DLQ record of one member (a ``flow_members`` row: event_id, event (JSON text),
    source_topic, source_partition, source_offset)."""
    event_id: str = member["event_id"]
    source = ConsumerRecord(
        topic=member["source_topic"] or "",
        partition=-1 if member["source_partition"] is None else member["source_partition"],
        offset=-1 if member["source_offset"] is None else member["source_offset"],
        timestamp=0,
        timestamp_type=0,
        key=None,
        value=None,
        checksum=None,
        serialized_key_size=-1,
        serialized_value_size=-1,
        headers=(),
    )
    headers = kafka.dlq_headers(source, reason, clip(detail), COMPONENT)
    headers.append((H_WINDOW_ID, str(window_id).encode()))
    body = orjson.dumps(orjson.loads(member["event"]))  # compact, as the router read it
    return OutboxMessage(
        dlq_id(window_id, event_id), dlq_topic, event_id.encode(), tuple(headers), body
    )


async def dead_letter(
    conn: asyncpg.Connection, window_id: int, dlq_topic: str, reason: str, detail: str
) -> int:
    """Inside the caller's transaction, holding the key's lock: if the window is not
    started nor dead-lettered yet, write its members' DLQ records to the outbox, delete
    them and mark the window ``dead_lettered``. Returns how many records this call wrote
    (0: the window was started or dead-lettered before)."""
    state = await conn.fetchval(
        "SELECT state FROM flow_windows WHERE id = $1 FOR UPDATE", window_id
    )
    if state not in ("open", "closed"):
        return 0
    members = await conn.fetch(MEMBERS_SQL, window_id)
    for m in members:
        await put_outbox(conn, record(m, window_id, dlq_topic, reason, detail))
    await conn.execute("DELETE FROM flow_members WHERE window_id = $1", window_id)
    await conn.execute(
        "UPDATE flow_windows SET state = 'dead_lettered', closed_at = COALESCE(closed_at, now()),"
        " dead_lettered_at = now(), dlq_reason = $2, dlq_detail = $3 WHERE id = $1",
        window_id,
        reason,
        clip(detail),
    )
    return len(members)


def count(reason: str, n: int) -> None:
    """Count ``n`` dead-lettered events (after the transaction committed)."""
    if n:
        metrics.DLQ_MESSAGES.labels(component=COMPONENT, reason=reason).inc(n)
