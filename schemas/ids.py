"""The only place workflow ids, run ids, event ids, schedule ids and permit ids are formed
(and the ids of debounced and batched runs and their window workflows, at the end, and
the permit resources of flow concurrency).

THESE FORMATS MUST NEVER CHANGE. They are the idempotency contract (README,
"The contract"): Temporal rejects a second start of the same workflow id, the
dedupe ledger is keyed by it, and ``run_id`` (the ``activity_runs`` primary
key) is derived from it. Changing a format, even its whitespace or time zone
rendering, makes every replay start everything again. Schedule and dispatcher
ids are found again by every ``ingest schedules sync``: changing them orphans
the existing schedules.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

# Fixed namespace for UUIDv5 derivations. Never change it (see module docstring).
_RUN_NAMESPACE = uuid.UUID("6f1c1c6e-3b8e-5d8a-9c41-4b1f0e7a2d10")
_EVENT_NAMESPACE = uuid.UUID("0b6b9d0e-7f54-5d3c-8a8e-2f4c3d1e9a77")
_CLOUDEVENT_NAMESPACE = uuid.UUID("d84fb428-9d54-474e-b269-98d5a98c8492")
_FLOW_KEY_NAMESPACE = uuid.UUID("3c0d8f5e-1a47-5b2e-9f6d-7e2a4b8c1d93")


def _require(name: str, value: str) -> str:
    if not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def normalise_scheduled_for(scheduled_for: datetime) -> datetime:
    """UTC, whole seconds. A naive datetime is refused: its zone is a guess."""
    if scheduled_for.tzinfo is None or scheduled_for.utcoffset() is None:
        raise ValueError("scheduled_for must be timezone-aware")
    return scheduled_for.astimezone(UTC).replace(microsecond=0)


def event_workflow_id(activity_id: str | uuid.UUID, event_id: str) -> str:
    """``activity-{activity_id}:{event_id}``."""
    return f"activity-{_require('activity_id', str(activity_id))}:{_require('event_id', event_id)}"


def cron_workflow_id(activity_id: str | uuid.UUID, scheduled_for: datetime) -> str:
    """``activity-{activity_id}:{scheduled_for.isoformat()}``, UTC with ``+00:00``."""
    nominal = normalise_scheduled_for(scheduled_for)
    return f"activity-{_require('activity_id', str(activity_id))}:{nominal.isoformat()}"


def task_workflow_id(run_id: str | uuid.UUID, task_type: str, index: int) -> str:
    """``task-{run_id}:{task_type}:{index}``."""
    if index < 0:
        raise ValueError("index must be >= 0")
    return f"task-{_require('run_id', str(run_id))}:{_require('task_type', task_type)}:{index}"


def permit_workflow_id(resource: str, slot: str) -> str:
    """``permit:{resource}:{slot}``."""
    return f"permit:{_require('resource', resource)}:{_require('slot', str(slot))}"


FLOW_RESOURCE_PREFIX = "flow."


def flow_resource(activity_id: str | uuid.UUID, key: str | None) -> str:
    """The permit resource of an activity's ``flow.concurrency`` (per key value).

    ``flow.{activity_id}`` without a key; ``flow.{activity_id}.{uuid5(key)}`` with one.
    Its slots are ``permit_workflow_id(flow_resource(...), slot)``: the lock a run holds
    while its tasks execute. The key value is hashed (UUIDv5, fixed namespace) because
    it is event data: any length, any character (``:`` would make the permit id
    ambiguous), while the resource stays 78 characters. The key itself is kept beside
    it in ``flow_slot_keys`` for ``ingest flow list``. An empty key is refused: a key
    is never silently null (schemas.flow.spec.key_value). Never change the format: a worker
    upgraded while runs hold slots would count them under another resource.
    """
    base = f"{FLOW_RESOURCE_PREFIX}{_require('activity_id', str(activity_id))}"
    if key is None:
        return base
    return f"{base}.{uuid.uuid5(_FLOW_KEY_NAMESPACE, _require('key', key))}"


SCHEDULE_PREFIX = "activity-schedule-"
DISPATCHER_PREFIX = "cron-fire-"


def schedule_id(activity_id: object) -> str:
    """``activity-schedule-{activity_id}``: one Temporal Schedule per cron activity."""
    return f"{SCHEDULE_PREFIX}{activity_id}"


def dispatcher_id(activity_id: object) -> str:
    """``cron-fire-{activity_id}``: Temporal appends ``-{nominal RFC3339}`` for each fire."""
    return f"{DISPATCHER_PREFIX}{activity_id}"


def dispatcher_workflow_id(activity_id: str, nominal: datetime) -> str:
    """The id Temporal gives the dispatcher of ``nominal``: ``{dispatcher_id}-{RFC3339}``."""
    return f"{dispatcher_id(activity_id)}-{nominal.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def run_id_for(workflow_id: str) -> uuid.UUID:
    """The ``activity_runs.run_id`` of a workflow id: UUIDv5, the same on every replay."""
    return uuid.uuid5(_RUN_NAMESPACE, _require("workflow_id", workflow_id))


def ingress_transactional_id(group: str, topic: str, partition: int) -> str:
    """The ``transactional_id`` of transactional ingress's producer for one raw partition.

    One id per input partition, from the consumer group and the topic-partition: aiokafka
    speaks only transaction protocol v0 (no KIP-447 group metadata), so the broker can fence
    a zombie only by this id. Whoever is assigned the partition next initialises the same id,
    which bumps its epoch, aborts the zombie's open transaction and refuses its later writes.
    NEVER CHANGE IT: a process with a new format would not fence one still running the old
    one (during a rolling upgrade both would write the same partition's events).
    """
    return f"ingest-ingress:{_require('group', group)}:{_require('topic', topic)}:{partition}"


def source_event_id(topic: str, partition: int, offset: int) -> str:
    """Ingress default: a UUIDv5 of the raw message's Kafka coordinates.

    A redelivered message has the same coordinates, so it gets the same id.
    """
    return source_event_id_of(f"{topic}/{partition}/{offset}".encode())


def source_event_id_of(coordinates: bytes) -> str:
    """:func:`source_event_id` of ``b"{topic}/{partition}/{offset}"`` already formed.

    Ingress forms those bytes once per message for its ``ingress_source`` header too.
    """
    h = _EVENT_NS_SHA1.copy()
    h.update(coordinates)
    return _uuid5_str(h.hexdigest())


_EVENT_NS_SHA1 = hashlib.sha1(_EVENT_NAMESPACE.bytes)  # copied per id: the namespace hashed once
# The RFC 4122 variant (binary 10xx) of the hex digit holding it: 0-3 -> 8, 4-7 -> 9, ...
_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def _uuid5_str(sha1_hex: str) -> str:
    """``str(uuid.uuid5(ns, name))`` from ``sha1(ns + name).hexdigest()``, without UUID objects
    (ingress hot path).

    RFC 4122 section 4.3: SHA-1 of namespace + name, first 16 bytes, version 5
    (hex digit 12 is ``5``), variant 10 (the top two bits of hex digit 16). Done on
    the hex string, not on bytes. A unit test pins equality with :func:`uuid.uuid5`.
    """
    x = sha1_hex
    return f"{x[:8]}-{x[8:12]}-5{x[13:16]}-{_VARIANT_DIGIT[x[16]]}{x[17:20]}-{x[20:32]}"


def cloudevent_event_id(source: str, ce_id: str) -> str:
    """The ``event_id`` of a CloudEvent: a UUIDv5 of its ``source`` and its ``id``.

    CloudEvents 1.0 makes ``source`` + ``id`` unique per distinct event, not ``id``
    alone: two producers (two sources) may both send id ``"1"``, and they are two
    events. The name hashed is ``"{n}:{source}{id}"``, ``n`` the length of ``source``
    in UTF-8 bytes, written in decimal: the length says where ``source`` ends, so no
    character of either attribute can move the boundary (``("a:b", "c")`` and
    ``("a", "b:c")`` are different names). UUIDv5 bounds the id to 36 characters
    whatever the producer's id, so ``activity-{activity_id}:{event_id}`` stays short.
    Binary mode (``ce_source``/``ce_id`` headers) and structured mode (JSON) parse to
    the same two strings, so both renderings of one event get the same id.

    Formed from 2026-12 on (issue 21); before, the event id was the bare CloudEvents
    ``id``. Never change it again: see the module docstring, and the "Upgrading" note
    in docs/message-formats.md for what the change did to runs recorded before it.
    """
    src = _require("source", source)
    name = f"{len(src.encode())}:{src}{_require('id', ce_id)}"
    return str(uuid.uuid5(_CLOUDEVENT_NAMESPACE, name))


def content_event_id(key: bytes | None, value: bytes) -> str:
    """Ingress ``content`` strategy: a UUIDv5 over the key and the value bytes."""
    h = hashlib.sha256()
    h.update(len(key or b"").to_bytes(8, "big"))
    h.update(key or b"")
    h.update(value)
    return str(uuid.uuid5(_EVENT_NAMESPACE, h.hexdigest()))


def relay_transactional_id(instance: str) -> str:
    """``ingest-outbox-relay:{instance}``: the outbox relay's Kafka ``transactional_id``.

    NEVER CHANGE IT. Every relay of one outbox (one database) uses the same id, so
    the broker fences a relay that a newer one replaced, and aborts the transaction
    it left open; its progress record on the progress topic is keyed by it too. A
    new format would let an old relay and a new one publish side by side, and would
    start a new relay from no progress (publishing the whole outbox again).
    """
    return f"ingest-outbox-relay:{_require('instance', instance)}"


def approval_notice_id(task_id: str, kind: str, body: bytes) -> str:
    """``{task_id}:{kind}:{digest(body)}``: the outbox id of one approval notice, and the
    ``notice_id`` header its consumers dedupe on (``_digest`` below).

    NEVER CHANGE IT. A notice activity retried after its outbox row was written (a
    worker killed before it reported) has the same input, so the same id, and writes
    nothing twice; a different notice (another round, reminder number, deadline...)
    has a different body. ``body`` is the notice's JSON as published.
    """
    return f"{_require('task_id', task_id)}:{_require('kind', kind)}:{_digest([body.decode()])}"


# --- debounce and batch windows (schemas/flow/spec.py, docs/flow-control.md) ------------
#
# A debounced or batched run is not the run of one event but of a window of events,
# so its id is derived from what the window CONTAINS, never from when it closed:
# membership is decided once, in PostgreSQL (``flow_members``: one row per
# (activity, event), written when the router assigns the event to a window), so a
# redelivered or replayed event finds its window already decided, and the window's
# members, hence its run id, are the same however often the events are read again.
# Each event belongs to at most one window, so two windows never share a member and
# never share an id. These formats, like every id here, must never change.

WINDOW_PREFIX = "flow-window-"
# The key of an activity whose debounce/batch has no ``key``: one window at a time for
# the whole activity. ``schemas.flow.spec.key_value`` never returns an empty string.
NO_KEY = ""


def _digest(parts: list[str]) -> str:
    """128 bits of SHA-256 over length-prefixed parts: ``"{n}:{part}"`` each, ``n`` its
    UTF-8 length, so no character of a part can move a boundary between two parts."""
    h = hashlib.sha256()
    for part in parts:
        raw = part.encode()
        h.update(f"{len(raw)}:".encode())
        h.update(raw)
    return h.hexdigest()[:32]


def window_workflow_id(activity_id: str | uuid.UUID, key: str) -> str:
    """``flow-window-{activity_id}:{digest(key)}``: the one window workflow per (activity,
    key), fed by signal-with-start. The key is hashed (it is event data: any length, any
    characters); ``ingest flow list`` shows it in clear from ``flow_windows``."""
    return f"{WINDOW_PREFIX}{_require('activity_id', str(activity_id))}:{_digest([key])}"


def batch_workflow_id(activity_id: str | uuid.UUID, event_ids: list[str]) -> str:
    """``activity-{activity_id}:batch-{digest(sorted event ids)}``: the run of one batch.

    The ids are sorted and de-duplicated first, so the order events arrived in (which a
    replay across partitions need not reproduce) does not change the id.
    """
    members = sorted(set(event_ids))
    if not members or not all(members):
        raise ValueError("a batch needs at least one non-empty event id")
    return f"activity-{_require('activity_id', str(activity_id))}:batch-{_digest(members)}"


def debounce_workflow_id(
    activity_id: str | uuid.UUID, first_event_id: str, last_event_id: str
) -> str:
    """``activity-{activity_id}:debounce-{digest(first, last)}``: the run of one debounce
    window, from its first and last member (in the order the window recorded them).

    The first member alone already names the window (an event is in one window only);
    the last is the event the run sees, so the id also says which event ran.
    """
    first = _require("first_event_id", first_event_id)
    last = _require("last_event_id", last_event_id)
    return f"activity-{_require('activity_id', str(activity_id))}:debounce-{_digest([first, last])}"


def window_lock_name(activity_id: str | uuid.UUID, key: str) -> str:
    """The PostgreSQL advisory-lock name of one (activity, key)'s windows: the router's
    assignments and the worker's closes take it, so they never interleave."""
    return f"flow-window:{activity_id}:{key}"
