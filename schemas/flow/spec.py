"""An activity's ``flow`` block: how its runs are paced (issue 23, docs/flow-control.md).

Every control is optional; a definition with no ``flow`` runs as before. Periods
are seconds, or a string with a unit: ``"500ms"``, ``"2s"``, ``"5m"``, ``"1h"``,
``"1d"``. A ``key`` is a dotted path into the event as the router sees it
(``data.customer_id``, ``subject``, ``extensions.tenant``); the limit then holds
per distinct value of that key. :func:`key_value` reads it: a missing or
non-scalar key is an error on the event (:class:`FlowKeyMissing`, DLQ reason
``flow_key_missing``), never a silent ``null`` key.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from schemas.envelope import EnvelopeError, id_problem

R_FLOW_KEY_MISSING = "flow_key_missing"
# The event's value of a flow key holds a control character or is over MAX_ID_BYTES
# (schemas.envelope.id_problem): it would become a primary key and a workflow id.
R_BAD_FLOW_KEY = "bad_flow_key"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
MAX_PERIOD_SECONDS = 7 * 86400.0


def parse_period(v: Any) -> Any:
    """``"2s"`` -> 2.0; numbers pass through (seconds); anything else is left to pydantic."""
    if isinstance(v, str):
        m = _DURATION.match(v)
        if m is None:
            raise ValueError(f"period {v!r}: use seconds or a number with ms, s, m, h or d")
        return float(m.group(1)) * _UNITS[m.group(2)]
    return v


# Seconds, > 0, at most 7 days (Inngest's longest debounce).
Period = Annotated[float, BeforeValidator(parse_period), Field(gt=0, le=MAX_PERIOD_SECONDS)]
KeyPath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$",
        description="a dotted path into the event, e.g. 'data.customer_id'",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConcurrencyDef(_Strict):
    """At most ``limit`` runs (per key value) run their tasks at once; the rest wait in order."""

    limit: int = Field(ge=1, le=1000)
    key: KeyPath | None = None


class ThrottleDef(_Strict):
    """At most ``limit`` run starts per ``period`` (GCRA); excess runs are delayed, never dropped.

    ``burst``: how many starts may go at once before the pacing applies (GCRA's
    burst tolerance, in starts); 1 spreads every start evenly.
    """

    limit: int = Field(ge=1, le=100_000)
    period: Period
    burst: int = Field(1, ge=1, le=100_000)
    key: KeyPath | None = None


class RateLimitDef(_Strict):
    """At most ``limit`` runs per ``period``; excess triggers are skipped and recorded."""

    limit: int = Field(ge=1, le=100_000)
    period: Period
    key: KeyPath | None = None


# --- Bytes: what a window's run carries through Temporal (issue 34) -------------------
#
# Temporal refuses a payload over 2 MiB (the server's ``limit.blobSize.error``; the SDK
# checks the same limit on what a worker records, TMPRL1103). A window's run carries its
# events in its input, and its plan (one local-activity marker) carries them once per
# task: every task's payload has ``events`` (a batch) or ``event`` (a debounce, the last
# one). A plan over the limit is not refused once: the worker fails the workflow task
# every 10 s for ever, and the run stays ``running`` (measured on the dev server: 2 tasks
# x a 1,000,000-byte event ran, a 2,001,390-byte marker; 3 tasks x 700,000 bytes, a
# 2,101,915-byte marker, never did).
#
# Bytes are counted as Temporal's JSON counts them (:func:`json_bytes`): compact, with
# every non-ASCII character escaped (``\uXXXX``), so text in Cyrillic is 3 times its
# UTF-8 size there and CJK text twice.
BLOB_LIMIT = 2 * 1024 * 1024
# What a task's spec holds besides the events and the definition's own payload and
# config (the trigger fields, the window, the dataclass around them): about 600 bytes
# measured on the plans above.
TASK_OVERHEAD_BYTES = 1024
# A batch closes before its members' bytes pass this, divided by the activity's task
# count (each task carries the batch): 1.5 MB for one task, well below BLOB_LIMIT.
WINDOW_MAX_BYTES = 1_500_000


def json_bytes(value: Any) -> int:
    """The length of ``value`` in the JSON the Temporal SDK sends (compact, ASCII)."""
    return len(json.dumps(value, separators=(",", ":")))


def run_bytes(tasks: int, carried: int, own: int = 0) -> int:
    """The largest payload of a run of ``tasks`` tasks (its plan) when each task carries
    ``carried`` bytes of events: :data:`TASK_OVERHEAD_BYTES` per task, plus ``own``, the
    bytes of the definitions' own payloads and configs (all tasks together)."""
    return max(tasks, 1) * (carried + TASK_OVERHEAD_BYTES) + own


class RunShape(NamedTuple):
    """What a run of an activity carries besides its event: ``tasks`` planned tasks (each
    carrying the event) and ``own`` bytes of their definitions' payloads and configs."""

    tasks: int
    own: int


NO_TASKS = RunShape(0, 0)


def run_shape(tasks: list[dict[str, Any]]) -> RunShape:
    """The :class:`RunShape` of an activity's stored ``tasks`` (``TaskDef`` documents)."""
    n = own = 0
    for t in tasks:
        count = t.get("count", 1) if isinstance(t, dict) else 1
        count = count if isinstance(count, int) and count > 0 else 1
        n += count
        own += count * json_bytes({"payload": t.get("payload"), "config": t.get("config")})
    return RunShape(n, own)


def event_run_problem(shape: RunShape, event: Any, size_hint: int) -> str | None:
    """Why a run of ``shape`` cannot carry ``event`` under :data:`BLOB_LIMIT`, or None.

    ``size_hint``: the event's bytes on the topic. Temporal's JSON of it is at most 3
    times that (a non-ASCII character escaped), so the exact count (:func:`json_bytes`)
    is only taken when even that bound does not fit.
    """
    if shape.tasks == 0 or run_fits(shape.tasks, 3 * size_hint, shape.own):
        return None
    carried = json_bytes(event)
    if run_fits(shape.tasks, carried, shape.own):
        return None
    total = run_bytes(shape.tasks, carried, shape.own)
    return (
        f"{shape.tasks} tasks each carry the event ({carried} bytes in Temporal's JSON):"
        f" a {total}-byte plan, over Temporal's {BLOB_LIMIT}-byte payload limit"
    )


def run_fits(tasks: int, carried: int, own: int = 0) -> bool:
    """Can Temporal carry such a run (:func:`run_bytes` within :data:`BLOB_LIMIT`)?"""
    return run_bytes(tasks, carried, own) <= BLOB_LIMIT


def batch_budget(max_bytes: int | None, tasks: int, own: int = 0) -> int:
    """The bytes of events a batch of an activity of ``tasks`` tasks may hold: its
    ``max_bytes`` (default :data:`WINDOW_MAX_BYTES`), at most WINDOW_MAX_BYTES / tasks,
    and never more than a run can carry (:func:`run_fits`); 0 when not even that."""
    n = max(tasks, 1)
    share = min(WINDOW_MAX_BYTES // n, (BLOB_LIMIT - own) // n - TASK_OVERHEAD_BYTES)
    return max(min(max_bytes, share) if max_bytes is not None else share, 0)


class DebounceDef(_Strict):
    """One run, with the last event, once ``period`` passed with no new event for the key.

    ``max_wait`` caps how long the first event of a window can be pushed back, so a
    steady stream still runs every ``max_wait``. A debounce window never closes by
    bytes: its run carries one event, the last, however many the window absorbed.
    """

    period: Period
    key: KeyPath | None = None
    max_wait: Period | None = None

    @model_validator(mode="after")
    def _max_wait_covers_period(self) -> DebounceDef:
        if self.max_wait is not None and self.max_wait < self.period:
            raise ValueError("max_wait must be at least period")
        return self


class BatchDef(_Strict):
    """One run per batch of up to ``max_size`` events: full, or ``timeout`` after its first.

    A batch also closes before the next event would take its events over ``max_bytes``
    (:func:`batch_budget`: default and ceiling ``WINDOW_MAX_BYTES`` divided by the task
    count), so its run fits Temporal's payload limit (``closed_by: bytes``).
    """

    max_size: int = Field(ge=1, le=1000)
    timeout: Period
    key: KeyPath | None = None
    max_bytes: int | None = Field(
        None,
        ge=1000,
        le=WINDOW_MAX_BYTES,
        description="close a batch before its events' bytes (Temporal's JSON) pass this",
    )


class PriorityDef(_Strict):
    """The order waiting runs start in: 1 (first) to 5 (last), fixed or read from the event.

    With ``key``, the event's value must be an integer 1..5; anything else, or a
    missing key, sends the event to the DLQ, as for every key here.
    """

    fixed: int | None = Field(None, ge=1, le=5)
    key: KeyPath | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PriorityDef:
        if (self.fixed is None) == (self.key is None):
            raise ValueError("priority needs exactly one of fixed (1..5) or key")
        return self


class SingletonDef(_Strict):
    """At most one run per key at a time: a new trigger is skipped, or cancels the running one."""

    mode: Literal["skip", "cancel"]
    key: KeyPath | None = None


class OrderedDef(_Strict):
    """Runs that share the key's value run one at a time, in the order of their events.

    The order is the order of the records on the events topic: the router gives each
    run its place in the key's line as it reads the partition (``router/flow/order.py``),
    and the worker starts a run's tasks only when every run before it in the line is
    done. A run that fails holds the runs after it until an operator releases it
    (``ingest flow release``). Without ``key`` the whole activity is one line.
    """

    key: KeyPath | None = None


class FairnessDef(_Strict):
    """Temporal task-queue fairness: runs (and their tasks) are dispatched fairly across
    the values of ``key`` (a tenant, say), weighted by ``weight`` (fixed) or by the
    number the event holds at ``weight_key``; default weight 1."""

    key: KeyPath
    weight: float | None = Field(None, gt=0, le=1000)
    weight_key: KeyPath | None = None

    @model_validator(mode="after")
    def _one_weight(self) -> FairnessDef:
        if self.weight is not None and self.weight_key is not None:
            raise ValueError("fairness takes weight (fixed) or weight_key (the event), not both")
        return self


EventType = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class CancelRule(_Strict):
    """An event of ``event_type`` cancels this activity's unfinished runs whose event
    matches it: ``match`` maps a path in the cancelling event to a path in the run's
    event (``{data.order_id: data.order_id}``); every pair must be equal."""

    event_type: EventType
    match: dict[KeyPath, KeyPath] = Field(min_length=1, max_length=5)


class TimeoutsDef(_Strict):
    """``start``: a run whose first task has not started this long after the run was
    created (waiting in a flow queue, a throttle delay, its turn) ends ``timed_out``;
    ``finish``: a run not finished this long after it was created ends ``timed_out``.
    Time held by an operator (``ingest activities pause``) restarts the start clock."""

    start: Period | None = None
    finish: Period | None = None

    @model_validator(mode="after")
    def _some(self) -> TimeoutsDef:
        if self.start is None and self.finish is None:
            raise ValueError("timeouts needs start, finish or both")
        if self.start is not None and self.finish is not None and self.finish <= self.start:
            raise ValueError("timeouts.finish must be longer than timeouts.start")
        return self


class FlowDef(_Strict):
    ordered: OrderedDef | None = None
    concurrency: ConcurrencyDef | None = None
    throttle: ThrottleDef | None = None
    rate_limit: RateLimitDef | None = None
    debounce: DebounceDef | None = None
    batch: BatchDef | None = None
    priority: PriorityDef | None = None
    singleton: SingletonDef | None = None
    cancel_on: list[CancelRule] | None = Field(None, min_length=1, max_length=10)
    fairness: FairnessDef | None = None
    timeouts: TimeoutsDef | None = None

    @model_validator(mode="after")
    def _compatible(self) -> FlowDef:
        if self.ordered is not None:
            window = next((c for c in ("debounce", "batch") if getattr(self, c)), None)
            if window is not None:
                raise ValueError(f"ordered and {window} cannot be combined: a window's run has no"
                                 " single event to take its place in line")  # fmt: skip
            skips = next((c for c in ("rate_limit", "singleton") if getattr(self, c)), None)
            if skips is not None:
                raise ValueError(f"ordered and {skips} cannot be combined: ordered runs every"
                                 f" event of a key, {skips} skips some")  # fmt: skip
        if self.debounce is not None and self.batch is not None:
            raise ValueError("debounce and batch cannot be combined: each decides the run's events")
        if self.cancel_on is not None:
            window = next((c for c in ("debounce", "batch") if getattr(self, c)), None)
            if window is not None:
                raise ValueError(f"cancel_on and {window} cannot be combined: an open {window}"
                                 " window is not a run yet and its run has no single event to"
                                 " match, so no event would ever cancel it; remove one of"
                                 " them")  # fmt: skip
        if self.priority is not None and self.concurrency is None and self.throttle is None:
            raise ValueError(
                "priority needs concurrency or throttle: it orders runs waiting on a limit"
            )
        return self

    def keys(self) -> dict[str, str]:
        """``{control: key path}`` of every control that has a key."""
        out: dict[str, str] = {}
        for name in type(self).model_fields:
            control = getattr(self, name)
            if control is not None and getattr(control, "key", None) is not None:
                out[name] = control.key
        return out

    def controls(self) -> list[str]:
        return [n for n in type(self).model_fields if getattr(self, n) is not None]


class FlowKeyMissing(EnvelopeError):
    """The event lacks a key its activity's flow needs (DLQ reason ``flow_key_missing``)."""

    def __init__(self, control: str, path: str, detail: str) -> None:
        super().__init__(R_FLOW_KEY_MISSING, f"flow.{control}.key {path!r}: {detail}")
        self.control = control
        self.path = path


def key_value(event: dict[str, Any], path: str, *, control: str) -> str:
    """The value at dotted ``path`` in ``event``, as a string (the key of a limit).

    Strings, integers and booleans are keys (``True`` -> ``"true"``); a missing
    field, ``null``, an empty string, a float, a list or an object is
    :class:`FlowKeyMissing`; a string with a control character or over 512 bytes is
    ``bad_flow_key`` (:func:`schemas.envelope.id_problem`). Floats are refused
    because their rendering is not stable across producers (``1`` vs ``1.0``), and a
    key must name one bucket.
    """
    node: Any = event
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise FlowKeyMissing(control, path, "missing from the event")
        node = node[part]
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, str) and node:
        problem = id_problem(node)
        if problem is not None:
            raise EnvelopeError(R_BAD_FLOW_KEY, f"flow.{control}.key {path!r} {problem}")
        return node
    kind = "null" if node is None else "empty" if node == "" else type(node).__name__
    raise FlowKeyMissing(control, path, f"is {kind}, not a non-empty string or integer")
