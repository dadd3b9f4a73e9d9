"""The only place workflow ids, run ids, event ids, schedule ids and permit ids are formed
(and the permit resources of flow concurrency).

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
    is never silently null (schemas.flow.key_value). Never change the format: a worker
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
