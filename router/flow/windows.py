"""Debounce and batch in the router: an event goes into its window instead of starting a run.

For an activity whose ``flow`` has ``debounce`` or ``batch``, :class:`Windows` takes
the place of the start (``router.routing.Routing._start_all`` calls :meth:`Windows.add`):

1. **Assign, once.** The event is written to ``flow_members`` (one row per (activity,
   event)) in the open window of its (activity, key), in one transaction per key that
   holds an advisory lock on the key (the worker closing a window takes the same lock),
   so an event lands in exactly one window and a closing window's members are final.
   A batch reaching ``max_size`` is closed right there, by count; one whose events'
   bytes would pass its budget with the next event is closed before it, by bytes
   (``schemas.flow.spec.batch_budget``: Temporal refuses a payload over 2 MiB, and every
   task of the run carries the batch). An event found in
   ``flow_members`` already (a Kafka redelivery, ``ingest replay``) is absorbed: it
   opens no window and joins no batch.
2. **Signal.** One signal-with-start to the key's window workflow
   (``schemas.ids.window_workflow_id``; ``workers/flow``) carries a note per
   window touched; that workflow keeps the timers and starts each closed window's run.
   A redelivered event whose window has not started its run yet is noted again (with
   no new event, so a debounce is not pushed back): the first note may be what the
   crash lost.
3. **Done** once both are acknowledged: only then may the router commit the offset
   (docs/router.md's commit rule). Either step failing for an outage is retried,
   never skipped.

**Hot keys.** Temporal advises at most about 5 signals per second, sustained, to one
workflow. Events for one key are therefore collected: while a key's flush is in flight,
or less than ``signal_interval`` after its last signal, new events queue, and the next
flush assigns and signals them all at once. A key never gets more than
``1 / signal_interval`` signals per second, whatever its event rate (bench/flow_windows.py
measures where one workflow's signal rate starts to lag).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
import orjson
from aiokafka.structs import ConsumerRecord
from temporalio.client import Client
from temporalio.service import RPCError

from pipeline import db, metrics
from pipeline.retry import until_done
from pipeline.starter import StartRejected, outage
from router.catalog import ActivityCatalog
from router.flow import metrics as flow_metrics
from schemas import ids
from schemas.flow.controls import Stage, declared
from schemas.flow.io import (
    FLOW_WINDOW_SIGNAL,
    FLOW_WINDOW_WORKFLOW,
    FlowWindowInput,
    FlowWindowSignal,
    WindowNote,
)
from schemas.flow.spec import BatchDef, DebounceDef, batch_budget, json_bytes, key_value
from schemas.workflow_io import TRIGGER_EVENT, WINDOW_DEBOUNCE, RunActivityInput

log = logging.getLogger(__name__)
T = TypeVar("T")

# What :meth:`Windows.add` answers.
ASSIGNED = "assigned"  # a new member of a window
ABSORBED = "absorbed"  # already a member (redelivery, replay): nothing new

# Per key, at most one signal per this many seconds (Temporal: ~5/s per workflow).
SIGNAL_INTERVAL = 0.2

# Why a window closed (flow_windows.closed_by) when the router closes it.
CLOSED_FULL = "full"  # a batch reached max_size
CLOSED_BYTES = "bytes"  # a batch's events reached its byte budget

# How many tasks a run of the activity plans (each carries the batch: the sum of the
# definitions' ``count``), and the bytes of their own payloads and configs (as PostgreSQL
# renders them, a little over the JSON Temporal is sent). The worker's close_window
# reads the same.
TASKS_SQL = (
    "SELECT coalesce(sum(coalesce((t->>'count')::int, 1)), 1)::int AS tasks,"
    " coalesce(sum(coalesce((t->>'count')::int, 1) * (octet_length(coalesce(t->'payload',"
    " '{}')::text) + octet_length(coalesce(t->'config', '{}')::text))), 0)::bigint AS own"
    " FROM activities a CROSS JOIN LATERAL jsonb_array_elements(a.tasks) t WHERE a.id = $1"
)


def window_control(
    flow: Any,
) -> tuple[str, DebounceDef | BatchDef] | None:
    """``("debounce", def)`` or ``("batch", def)`` of a flow block, or None (the
    window controls of :mod:`schemas.flow.controls`; ``FlowDef`` allows one at most)."""
    windowed = declared(flow, Stage.WINDOW)
    return (windowed[0], getattr(flow, windowed[0])) if windowed else None


@dataclass(frozen=True)
class _Item:
    event_id: str
    event: dict[str, Any]
    topic: str
    partition: int
    offset: int


@dataclass
class _Queue:
    """The events of one (activity, key) waiting for the next flush."""

    kind: str
    control: DebounceDef | BatchDef
    items: list[tuple[_Item, asyncio.Future[str]]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    last_signal: float = 0.0


def _note(
    kind: str, control: DebounceDef | BatchDef, window_id: int, new: int, closed: bool
) -> WindowNote:
    if isinstance(control, DebounceDef):
        return WindowNote(
            window_id, kind, new, closed, period=control.period, max_wait=control.max_wait
        )
    return WindowNote(window_id, kind, new, closed, timeout=control.timeout)


async def assign(
    pool: asyncpg.Pool,
    activity_id: str,
    key: str,
    kind: str,
    control: DebounceDef | BatchDef,
    items: list[_Item],
) -> tuple[list[str], list[WindowNote]]:
    """Assign ``items`` (in order) to windows of (activity, key) in one transaction.

    Returns each item's outcome (:data:`ASSIGNED` or :data:`ABSORBED`) and the notes
    for the window workflow (empty when every item was absorbed into started windows).

    A batch closes by count (``max_size``) or by bytes: before an event that would take
    its events past :func:`schemas.flow.spec.batch_budget` joins it (that event opens the
    next batch), or as soon as they reach it (a single event over the budget is a batch
    of its own, which the worker then dead-letters if no run can carry it).
    """
    aid = uuid.UUID(activity_id)
    max_size = control.max_size if isinstance(control, BatchDef) else None
    sizes = [json_bytes(i.event) for i in items]  # outside the lock
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            ids.window_lock_name(activity_id, key),
        )
        budget: int | None = None
        if isinstance(control, BatchDef):
            plan = await conn.fetchrow(TASKS_SQL, aid)
            budget = batch_budget(control.max_bytes, plan["tasks"], plan["own"])
        known = {
            r["event_id"]: (r["window_id"], r["state"])
            for r in await conn.fetch(
                "SELECT m.event_id, m.window_id, w.state FROM flow_members m"
                " JOIN flow_windows w ON w.id = m.window_id"
                " WHERE m.activity_id = $1 AND m.event_id = ANY($2::text[])",
                aid,
                [i.event_id for i in items],
            )
        }
        row = await conn.fetchrow(
            "SELECT id, size, bytes FROM flow_windows"
            " WHERE activity_id = $1 AND key = $2 AND kind = $3 AND state = 'open'",
            aid,
            key,
            kind,
        )
        # [id, size, bytes] of the open window
        window: list[int] | None = [row["id"], row["size"], row["bytes"]] if row else None
        outcomes: list[str] = []
        # window id -> [new events, size, closed, bytes]
        touched: dict[int, list[int]] = {}
        members: list[tuple[Any, ...]] = []

        async def close(w: list[int], why: str) -> None:
            note = touched.setdefault(w[0], [0, w[1], 0, w[2]])
            note[2] = 1  # closed here, before the next window opens
            await conn.execute(
                "UPDATE flow_windows SET state = 'closed', closed_by = $2, closed_at = now()"
                " WHERE id = $1",
                w[0],
                why,
            )

        for item, nbytes in zip(items, sizes, strict=True):
            if item.event_id in known:
                wid, state = known[item.event_id]
                outcomes.append(ABSORBED)
                if state in ("open", "closed") and wid not in touched:
                    touched[wid] = [0, -1, int(state == "closed"), -1]
                continue
            if (
                window is not None
                and budget is not None
                and window[1] > 0
                and window[2] + nbytes > budget
            ):
                await close(window, CLOSED_BYTES)  # this event would take it over
                window = None
            if window is None:
                wid = await conn.fetchval(
                    "INSERT INTO flow_windows (activity_id, kind, key) VALUES ($1, $2, $3)"
                    " RETURNING id",
                    aid,
                    kind,
                    key,
                )
                window = [wid, 0, 0]
            window[1] += 1
            window[2] += nbytes
            wid, size, total = window
            known[item.event_id] = (wid, "open")
            note = touched.setdefault(wid, [0, size, 0, total])
            note[0] += 1
            note[1] = size
            note[3] = total
            members.append(
                (aid, item.event_id, wid, size, orjson.dumps(item.event).decode(),
                 item.topic, item.partition, item.offset)
            )  # fmt: skip
            outcomes.append(ASSIGNED)
            if max_size is not None and size >= max_size:
                await close(window, CLOSED_FULL)
                window = None
            elif budget is not None and total >= budget:
                await close(window, CLOSED_BYTES)
                window = None
        if members:
            await conn.execute(
                "INSERT INTO flow_members (activity_id, event_id, window_id, position, event,"
                " source_topic, source_partition, source_offset)"
                " SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::int[],"
                " $5::jsonb[], $6::text[], $7::int[], $8::bigint[])",
                *[list(c) for c in zip(*members, strict=True)],
            )
            grown = [(w, n[1], n[3]) for w, n in touched.items() if n[0]]
            await conn.execute(
                "UPDATE flow_windows w SET size = u.size, bytes = u.bytes, last_event_at = now()"
                " FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS u(id, size, bytes)"
                " WHERE w.id = u.id",
                *[list(c) for c in zip(*grown, strict=True)],
            )
    notes = [_note(kind, control, w, n[0], bool(n[2])) for w, n in touched.items()]
    return outcomes, notes


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, OSError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, asyncpg.PostgresConnectionError | asyncpg.InterfaceError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", "") or ""
        # 23505 on flow_members: one event id under two keys of one activity (a producer
        # reusing an id with other data), assigned by two flushes at once, each under its
        # own key's lock. A race, not bad data: the retry finds the member and absorbs it
        # (found by tests/fuzz; it was dead-lettered route_failed).
        if state == "23505" and getattr(exc, "constraint_name", "") == "flow_members_pkey":
            return True
        return state[:2] in ("08", "53", "57", "40")
    return isinstance(exc, RPCError) and outage(exc) is not None


@dataclass(kw_only=True)
class Windows:
    """The router's side of debounce and batch (see the module docstring)."""

    pool: asyncpg.Pool
    client: Client
    task_queue: str
    catalog: ActivityCatalog
    stopping: Callable[[], bool]
    component: str = "router"
    signal_interval: float = SIGNAL_INTERVAL
    _queues: dict[tuple[str, str], _Queue] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        # The per-activity series (pipeline.metrics.DATA_LABELLED) appear with their
        # activity's first event; this one is known from the start.
        metrics.start_at_zero(
            metrics.DUPLICATES_SUPPRESSED,
            component=[self.component],
            trigger=[TRIGGER_EVENT],
            layer=[metrics.LAYER_FLOW_WINDOW],
        )

    def wants(self, activity_id: str) -> bool:
        """Does ``activity_id`` collect its events into windows?"""
        return window_control(self.catalog.flow(activity_id)) is not None

    async def add(self, msg: ConsumerRecord, run: RunActivityInput) -> str:
        """Put ``run``'s event into its window; :data:`ASSIGNED` or :data:`ABSORBED`.

        Returns once the assignment is committed and the window workflow has the note.
        Raises ``FlowKeyMissing`` (the event lacks the key: DLQ), ``StartRejected``
        (Temporal refused the signal for good: DLQ) or ``ShutdownRequested``.
        """
        found = window_control(self.catalog.flow(run.activity_id))
        assert found is not None and run.event is not None and run.event_id is not None
        kind, control = found
        key = key_value(run.event, control.key, control=kind) if control.key else ids.NO_KEY
        queue = self._queues.get((run.activity_id, key))
        if queue is None or queue.kind != kind:
            queue = self._queues[(run.activity_id, key)] = _Queue(kind, control)
        queue.control = control
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        queue.items.append(
            (_Item(run.event_id, run.event, msg.topic, msg.partition, msg.offset), done)
        )
        if queue.task is None or queue.task.done():
            queue.task = asyncio.create_task(self._drain(run.activity_id, key, queue))
        outcome = await asyncio.shield(done)
        if outcome == ASSIGNED and kind == WINDOW_DEBOUNCE:
            flow_metrics.FLOW_DEBOUNCED.labels(activity=run.activity_id).inc()
        elif outcome == ABSORBED:
            metrics.DUPLICATES_SUPPRESSED.labels(
                component=self.component, trigger=TRIGGER_EVENT, layer=metrics.LAYER_FLOW_WINDOW
            ).inc()
        return outcome

    async def _drain(self, activity_id: str, key: str, queue: _Queue) -> None:
        """Flush ``queue`` until it stays empty: at most one signal per ``signal_interval``."""
        while queue.items:
            wait = queue.last_signal + self.signal_interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            batch, queue.items = queue.items, []
            try:
                outcomes = await self._flush(activity_id, key, queue, [i for i, _ in batch])
            except asyncio.CancelledError:
                for _, fut in batch:
                    fut.cancel()
                raise
            except Exception as exc:  # ShutdownRequested, StartRejected, a refused assignment
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            finally:
                queue.last_signal = time.monotonic()
            for (_, fut), outcome in zip(batch, outcomes, strict=True):
                if not fut.done():
                    fut.set_result(outcome)
        if self._queues.get((activity_id, key)) is queue:
            del self._queues[(activity_id, key)]

    async def _flush(
        self, activity_id: str, key: str, queue: _Queue, items: list[_Item]
    ) -> list[str]:
        outcomes, notes = await self._retry(
            "window assignment",
            lambda: assign(self.pool, activity_id, key, queue.kind, queue.control, items),
        )
        if notes:
            await self._retry("window signal", lambda: self._signal(activity_id, key, notes))
        return outcomes

    async def _signal(self, activity_id: str, key: str, notes: list[WindowNote]) -> None:
        try:
            await self.client.start_workflow(
                FLOW_WINDOW_WORKFLOW,
                FlowWindowInput(activity_id, key),
                id=ids.window_workflow_id(activity_id, key),
                task_queue=self.task_queue,
                start_signal=FLOW_WINDOW_SIGNAL,
                start_signal_args=[FlowWindowSignal(notes)],
            )
        except RPCError as exc:
            if outage(exc) is None:
                raise StartRejected(f"window signal {exc.status.name}: {exc.message}") from None
            raise
        flow_metrics.FLOW_WINDOW_SIGNALS.labels(activity=activity_id).inc()

    async def _retry(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        return await until_done(what, fn, retriable=_retriable, stopping=self.stopping)


@dataclass(frozen=True)
class WindowRow:
    """One window not yet started, as ``ingest flow list`` shows it."""

    activity_id: str
    kind: str
    key: str
    window_id: int
    state: str  # "open" | "closed"
    size: int
    opened_at: str
    last_event_at: str


async def open_windows(pool: Any, activity_id: str | None = None) -> list[WindowRow]:
    """Every debounce window and batch whose run has not started yet (per activity, key);
    ``pool``: a pool or a connection. A dead-lettered window is not listed: its events
    are in the DLQ (``pipeline_dlq_messages_total{component="worker"}``)."""
    rows = await pool.fetch(
        "SELECT activity_id::text AS activity_id, kind, key, id, state, size, opened_at,"
        " last_event_at FROM flow_windows"
        " WHERE state IN ('open', 'closed') AND ($1::uuid IS NULL OR activity_id = $1::uuid)"
        " ORDER BY activity_id, key, id",
        uuid.UUID(activity_id) if activity_id else None,
    )
    return [
        WindowRow(
            r["activity_id"], r["kind"], r["key"], r["id"], r["state"], r["size"],
            r["opened_at"].isoformat(), r["last_event_at"].isoformat(),
        )
        for r in rows
    ]  # fmt: skip


async def listing_source(conn: Any, activity_id: str | None = None) -> list[dict[str, Any]]:
    """The ``windows`` column of ``ingest flow list`` (``router.flow.listing.SOURCES``):
    per (activity, key), the debounce windows and batches whose run has not started."""
    counts: dict[tuple[str, str], int] = {}
    for w in await open_windows(conn, activity_id):
        counts[(w.activity_id, w.key)] = counts.get((w.activity_id, w.key), 0) + 1
    return [{"activity_id": a, "key": k, "windows": n} for (a, k), n in sorted(counts.items())]


async def prune(pool: asyncpg.Pool, retention_days: float) -> int:
    """Delete started and dead-lettered windows (and their members) older than the
    ledger retention."""
    return await db.prune_older_than(
        pool,
        "DELETE FROM flow_windows WHERE (state = 'started'"
        " AND started_at < now() - make_interval(secs => $1)) OR (state = 'dead_lettered'"
        " AND dead_lettered_at < now() - make_interval(secs => $1))",
        retention_days,
    )
