"""Turning one event-topic message into its starts: the code path live routing and replay share.

:class:`RoutePlanner` is pure: message -> :class:`Plan` (the runs to start, or
a DLQ reason, or "unmatched"). :class:`Routing` executes plans: one ledger
look-up per batch, bounded-concurrency starts, DLQ produces, and the
bookkeeping that lets the caller commit only what Temporal acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord
from temporalio.client import Client

from pipeline import kafka, metrics, tracing
from pipeline.retry import ShutdownRequested, until_done
from pipeline.settings import Settings
from pipeline.starter import DUPLICATE, Starter, StartRejected
from router.catalog import ActivityCatalog
from router.flow.cancel import Cancels, CancelTarget, targets
from router.flow.gate import START, FlowGate
from router.flow.keys import FlowKeys, read_keys
from router.flow.order import OrderLines, PlaceRequest, line_key
from router.flow.store import FlowStore
from router.flow.windows import ASSIGNED, Windows, window_control
from router.ledger import Ledger, LedgerEntry
from router.metrics import EVENTS_UNMATCHED, START_LATENCY
from router.settings import RouterSettings
from schemas import envelope
from schemas.flow.spec import event_run_problem
from schemas.workflow_io import RunActivityInput

log = logging.getLogger(__name__)

# DLQ reason of a message whose routing failed with an error that a retry cannot fix
# (PostgreSQL refused a value, a bug): the error's class and text go in dlq_detail. Only
# transient errors (connection, unavailable, deadlock, serialization) are retried.
R_ROUTE_FAILED = "route_failed"
# DLQ reason of an event too large for a subscriber's run: each of the activity's tasks
# carries the event, and the run's plan would pass Temporal's 2 MB payload limit (a run
# that would stay running for ever). The activities whose runs fit still start.
R_RUN_TOO_LARGE = "run_too_large"


@dataclass
class Stats:
    """What happened to the messages routed so far (replay prints these)."""

    read: int = 0
    started: int = 0
    ledger_duplicates: int = 0
    temporal_duplicates: int = 0
    would_start: int = 0
    skipped: int = 0  # by the activity's flow (rate_limit, singleton): never started
    windowed: int = 0  # events put into a debounce window or a batch (router/flow/windows.py)
    cancelled: int = 0  # runs a cancel_on event asked Temporal to cancel (router/flow/cancel.py)
    dlq: int = 0
    unmatched: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Plan:
    msg: ConsumerRecord
    runs: list[RunActivityInput] = field(default_factory=list)
    dlq_reason: str | None = None
    dlq_detail: str = ""
    # The flow keys of each run whose activity has a flow block, by workflow id.
    flows: dict[str, FlowKeys] = field(default_factory=dict)
    # Subscribers whose run could not carry the event (R_RUN_TOO_LARGE), and why.
    too_large: list[str] = field(default_factory=list)
    # flow.cancel_on: the (activity, match key) whose unfinished runs this event cancels.
    cancels: list[CancelTarget] = field(default_factory=list)
    event_id: str | None = None  # the cancelling event's (set with ``cancels``)


class RoutePlanner:
    def __init__(self, catalog: ActivityCatalog, max_event_bytes: int) -> None:
        self.catalog = catalog
        self.max_event_bytes = max_event_bytes

    def plan(self, msg: ConsumerRecord) -> Plan:
        """The message's plan; never raises (a bug planning it dead-letters it ``route_failed``)."""
        try:
            return self._plan(msg)
        except Exception as exc:
            log.exception("planning %s[%d]@%d failed", msg.topic, msg.partition, msg.offset)
            return Plan(msg, dlq_reason=R_ROUTE_FAILED, dlq_detail=f"planning: {_what(exc)}")

    def _plan(self, msg: ConsumerRecord) -> Plan:
        try:
            env = envelope.parse(msg.value, msg.headers, max_bytes=self.max_event_bytes)
        except envelope.EnvelopeError as exc:
            return Plan(msg, dlq_reason=exc.reason, dlq_detail=exc.detail)
        if not env.event_id:
            return Plan(
                msg,
                dlq_reason=envelope.R_MISSING_EVENT_ID,
                dlq_detail="events reaching the router must carry event_id (ingress stamps it)",
            )
        event = env.to_dict()
        runs = []
        flows: dict[str, FlowKeys] = {}
        too_large: list[str] = []
        for activity_id in self.catalog.subscribers(env.type):
            flow = self.catalog.flow(activity_id)
            if window_control(flow) is None:  # a window's run is sized by the window
                size = len(msg.value or b"")
                problem = event_run_problem(self.catalog.shape(activity_id), event, size)
                if problem is not None:
                    too_large.append(f"activity {activity_id}: {problem}")
                    continue
            try:
                run = RunActivityInput.for_event(activity_id, env.event_id, event)
            except ValueError as exc:  # pragma: no cover - guarded above
                return Plan(msg, dlq_reason=envelope.R_BAD_FIELD, dlq_detail=str(exc))
            runs.append(run)
            if flow is not None:
                try:
                    flows[run.workflow_id] = read_keys(flow, event)
                except envelope.EnvelopeError as exc:  # FlowKeyMissing: the whole message
                    return Plan(msg, dlq_reason=exc.reason, dlq_detail=exc.detail)
        try:
            cancels = targets(self.catalog.cancel_rules(env.type), env.type, event)
        except envelope.EnvelopeError as exc:  # FlowKeyMissing: the whole message
            return Plan(msg, dlq_reason=exc.reason, dlq_detail=exc.detail)
        if not runs and not too_large and not cancels:
            EVENTS_UNMATCHED.inc()  # no label from event data (convention 14)
        return Plan(
            msg, runs=runs, flows=flows, too_large=too_large, cancels=cancels,
            event_id=env.event_id if cancels else None,
        )  # fmt: skip


@dataclass(kw_only=True)
class Routing:
    """Executes plans. ``on_done(tp, offset)`` is called once a message is fully handled."""

    planner: RoutePlanner
    starter: Starter
    producer: AIOKafkaProducer
    dlq_topic: str
    ledger: Ledger | None
    concurrency: int
    on_done: Callable[[TopicPartition, int], None]
    stopping: Callable[[], bool]
    component: str = "router"
    dry_run: bool = False
    # Asked before every start (router/flow); None: every run starts at once.
    gate: FlowGate | None = None
    # Debounce and batch: events of those activities go into windows, not starts.
    windows: Windows | None = None
    # flow.ordered: each run's place in its key's line, given in submit (batch order).
    order: OrderLines | None = None
    # flow.cancel_on: cancelling events cancel the runs they match (before their offset).
    cancels: Cancels | None = None
    # Tracing (pipeline/tracing.py): the consumer group on each message's span, and
    # what every span links to (a replay's session span).
    group: str | None = None
    trace_links: list[Any] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats, init=False)
    # Acknowledged but not yet written to the ledger; flushed before each commit.
    pending_ledger: list[LedgerEntry] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.sem = asyncio.Semaphore(self.concurrency)

    async def submit(self, batch: list[ConsumerRecord]) -> list[asyncio.Task[None]]:
        """Plan a batch, look it up in the ledger once, and spawn one task per message."""
        plans = [self.planner.plan(m) for m in batch]
        self.stats.read += len(batch)
        seen = await self._seen(plans) if self.ledger is not None else set()
        if self.order is not None and not self.dry_run:
            # Here, not in the per-message tasks: those decide concurrently.
            await self._place(plans, seen)
        return [asyncio.create_task(self._handle(p, seen)) for p in plans]

    async def _seen(self, plans: list[Plan]) -> set[str]:
        """The batch's workflow ids found in the ledger, in one query.

        When that query fails for good (one message's id that PostgreSQL refuses),
        each message is looked up alone: the one that fails is dead-lettered
        ``route_failed``, the others route as usual.
        """
        ledger = self.ledger
        assert ledger is not None
        wids = [r.workflow_id for p in plans for r in p.runs]
        try:
            return await self._retry("ledger lookup", lambda: ledger.seen(wids))  # type: ignore[no-any-return]
        except ShutdownRequested:
            raise
        except Exception as exc:
            log.warning("ledger lookup of %d ids failed for good (%r): one by one", len(wids), exc)
        seen: set[str] = set()
        for plan in plans:
            if not plan.runs:
                continue
            own = [r.workflow_id for r in plan.runs]
            try:
                seen |= await self._retry("ledger lookup", lambda own=own: ledger.seen(own))  # type: ignore[misc]
            except ShutdownRequested:
                raise
            except Exception as exc:
                plan.runs, plan.flows = [], {}
                plan.dlq_reason, plan.dlq_detail = R_ROUTE_FAILED, f"ledger lookup: {_what(exc)}"
        return seen

    async def _place(self, plans: list[Plan], seen: set[str]) -> None:
        """flow.ordered: the places of the batch's new ordered runs, in batch order, in one
        call (router/flow/order.py). Failing for good, each message is placed alone, in
        order: the one that fails is dead-lettered ``route_failed`` (it holds no place)."""
        order = self.order
        assert order is not None

        def requests(plan: Plan) -> list[PlaceRequest]:
            out = []
            for run in plan.runs:
                key = line_key(plan.flows.get(run.workflow_id))
                if key is not None and run.workflow_id not in seen:
                    m = plan.msg
                    out.append(PlaceRequest(run, key, m.topic, m.partition, m.offset))
            return out

        todo = [(p, requests(p)) for p in plans if p.dlq_reason is None]
        todo = [(p, r) for p, r in todo if r]
        every = [r for _, rs in todo for r in rs]
        if not every:
            return
        try:
            await self._retry("flow order", lambda: order.assign(every))
            return
        except ShutdownRequested:
            raise
        except Exception as exc:
            log.warning("placing %d ordered runs failed for good (%r): one by one", len(every), exc)
        for plan, own in todo:
            try:
                await self._retry("flow order", lambda own=own: order.assign(own))  # type: ignore[misc]
            except ShutdownRequested:
                raise
            except Exception as exc:
                plan.runs, plan.flows = [], {}
                plan.dlq_reason, plan.dlq_detail = R_ROUTE_FAILED, f"flow order: {_what(exc)}"

    async def _unplace(self, run: RunActivityInput, flows: dict[str, FlowKeys]) -> None:
        """flow.ordered: a run that will not start closes its place (``dropped``), so it
        never holds its line; best effort past retries (a release frees a stuck line)."""
        order = self.order
        if order is None or self.dry_run or line_key(flows.get(run.workflow_id)) is None:
            return
        try:
            await self._retry("flow order drop", lambda: order.drop([run.workflow_id]))
        except ShutdownRequested:
            raise
        except Exception:
            log.exception("could not drop the place of %s: its line waits for a release",
                          run.workflow_id)  # fmt: skip

    def _span(self, plan: Plan) -> AbstractContextManager[Any]:
        """The message's span (tracing on): a child of the context its record carries."""
        if not tracing.ENABLED:
            return nullcontext()
        runs = plan.runs
        return tracing.consumed(
            f"process {plan.msg.topic}",
            plan.msg,
            self.group,
            event_id=runs[0].event_id if runs else None,
            links=self.trace_links,
            attributes={"ingest.component": self.component, "ingest.runs": len(runs)},
        )

    async def _handle(self, plan: Plan, seen: set[str]) -> None:
        with self._span(plan):
            await self._handle_traced(plan, seen)

    async def _handle_traced(self, plan: Plan, seen: set[str]) -> None:
        msg = plan.msg
        tp = TopicPartition(msg.topic, msg.partition)
        try:
            if plan.dlq_reason is not None:
                await self._dead_letter(msg, plan.dlq_reason, plan.dlq_detail)
            else:
                if plan.cancels and not self.dry_run:
                    # Before this message's own starts: a run it triggers is decided after it
                    # and is never one it cancels.
                    await self._cancel(plan)
                todo = []
                for run in plan.runs:
                    if run.workflow_id in seen:
                        with tracing.child("route", **_run_attrs(run)) as span:
                            tracing.decide(span, "duplicate", duplicate_layer=metrics.LAYER_LEDGER)
                        self.stats.ledger_duplicates += 1
                        metrics.DUPLICATES_SUPPRESSED.labels(
                            component=self.component,
                            trigger=run.trigger_kind,
                            layer=metrics.LAYER_LEDGER,
                        ).inc()
                    else:
                        todo.append(run)
                if self.dry_run:
                    self.stats.would_start += len(todo)
                elif todo:
                    rejected = await self._start_all(msg, todo, plan.flows)
                    if rejected is not None:
                        await self._dead_letter(msg, rejected.reason, rejected.detail)
                        plan.too_large = []  # one DLQ record per message; a re-drive redoes both
                if plan.too_large:
                    await self._dead_letter(msg, R_RUN_TOO_LARGE, "; ".join(plan.too_large))
                elif not plan.runs and not plan.cancels:
                    self.stats.unmatched += 1
        except (ShutdownRequested, asyncio.CancelledError):
            return  # not done: the offset stays uncommitted and is redelivered
        except Exception as exc:
            # A retry cannot fix it (transient errors were retried inside): this message
            # goes to the DLQ and its offset completes, so it holds back no other.
            log.warning(
                "routing %s[%d]@%d failed for good: %s",
                msg.topic, msg.partition, msg.offset, _what(exc), exc_info=exc,
            )  # fmt: skip
            try:
                await self._dead_letter(msg, R_ROUTE_FAILED, _what(exc))
            except (ShutdownRequested, asyncio.CancelledError):
                return
            except Exception:
                # Not even the DLQ takes it: the offset stays pending, said loudly.
                log.exception("DLQ refused %s[%d]@%d", msg.topic, msg.partition, msg.offset)
                return
        self.on_done(tp, msg.offset)

    async def _start_all(
        self, msg: ConsumerRecord, runs: list[RunActivityInput], flows: dict[str, FlowKeys]
    ) -> StartRejected | envelope.EnvelopeError | None:
        async def one(run: RunActivityInput) -> StartRejected | envelope.EnvelopeError | None:
            if not tracing.ENABLED:
                return await start(run, None)
            with tracing.child("route", **_run_attrs(run)) as span:
                return await start(run, span)

        async def start(
            run: RunActivityInput, span: Any
        ) -> StartRejected | envelope.EnvelopeError | None:
            if self.windows is not None and self.windows.wants(run.activity_id):
                # Debounce and batch: the window's run is started by its window workflow.
                try:
                    assigned = await self.windows.add(msg, run) == ASSIGNED
                except (StartRejected, envelope.EnvelopeError) as exc:  # e.g. FlowKeyMissing
                    tracing.decide(span, "rejected", reason=str(exc))
                    return exc
                if assigned:
                    tracing.decide(span, "windowed")
                else:
                    tracing.decide(span, "duplicate", duplicate_layer=metrics.LAYER_FLOW_WINDOW)
                self.stats.windowed += assigned
                self.stats.ledger_duplicates += not assigned
                return None
            async with self.sem:
                decision = START
                if self.gate is not None:
                    gate, fk = self.gate, flows.get(run.workflow_id)
                    decision = await self._retry("flow decision", lambda: gate.decide(run, fk))
                if decision.skip is not None:
                    # Recorded by the gate (flow_decisions) before the offset is committed.
                    tracing.decide(span, "skipped", skip_reason=decision.skip)
                    self.stats.skipped += 1
                    return None
                try:
                    fk = flows.get(run.workflow_id)
                    outcome = await self.starter.start(
                        run,
                        start_delay=decision.start_delay,
                        priority=fk.priority if fk is not None else None,
                        fairness=fk.fairness if fk is not None else None,
                    )
                except StartRejected as exc:
                    tracing.decide(span, "rejected", reason=exc.reason, detail=exc.detail)
                    return exc
            if outcome == DUPLICATE:
                tracing.decide(span, "duplicate", duplicate_layer=metrics.LAYER_TEMPORAL)
                self.stats.temporal_duplicates += 1
            else:
                if decision.start_delay:
                    delay = decision.start_delay.total_seconds()
                    tracing.decide(span, "throttled", delay_seconds=delay)
                else:
                    tracing.decide(span, "started")
                self.stats.started += 1
                if msg.timestamp and msg.timestamp > 0:
                    START_LATENCY.observe(max(0.0, time.time() - msg.timestamp / 1000))
            self.pending_ledger.append(
                LedgerEntry(
                    workflow_id=run.workflow_id,
                    activity_id=run.activity_id,
                    event_id=run.event_id,
                    source_topic=msg.topic,
                    source_partition=msg.partition,
                    source_offset=msg.offset,
                )
            )
            return None

        # Every run finishes before the message is judged: a sibling that fails for good
        # must not leave the others running after the message is dead-lettered.
        # A rejection is returned, an error raised: both are exceptions once gathered, so
        # the returned ones travel in a list (a rejection keeps its own DLQ reason).
        async def judged(run: RunActivityInput) -> list[StartRejected | envelope.EnvelopeError]:
            try:
                rejected = await one(run)
            except (ShutdownRequested, asyncio.CancelledError):
                raise
            except Exception:
                await self._unplace(run, flows)  # its message is dead-lettered
                raise
            if rejected is None:
                return []
            await self._unplace(run, flows)
            return [rejected]

        results = await asyncio.gather(*(judged(r) for r in runs), return_exceptions=True)
        for r in results:
            if isinstance(r, ShutdownRequested | asyncio.CancelledError):
                raise r
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return next((r[0] for r in results if r), None)  # type: ignore[index]

    async def _cancel(self, plan: Plan) -> None:
        """Cancel what a cancelling event matches (router/flow/cancel.py); transient
        errors are retried, so the offset completes only once every request was made."""
        cancels = self.cancels
        if cancels is None:
            return
        event_id = plan.event_id
        assert event_id is not None
        for target in plan.cancels:
            n = await self._retry(
                "flow cancel",
                lambda t=target: cancels.act(event_id, t),  # type: ignore[misc]
            )
            self.stats.cancelled += n

    async def _dead_letter(self, msg: ConsumerRecord, reason: str, detail: str) -> None:
        redrive = msg.topic == self.dlq_topic  # replay --dlq: keep the first source
        headers = kafka.dlq_headers(msg, reason, detail, self.component, redrive=redrive)
        if not self.dry_run:
            value = msg.value
            try:
                await self._retry(
                    "DLQ produce",
                    lambda: self.producer.send_and_wait(
                        self.dlq_topic, value, key=kafka.dlq_key(msg), headers=headers
                    ),
                )
            except Exception as exc:
                if not kafka.is_too_large(exc) or value is None:
                    raise
                # As ingress does: the DLQ record without the value Kafka refused; its
                # dlq_source_* headers say where the original lives.
                log.error("DLQ refused %s[%d]@%d with its value: %s; sending it without",
                          msg.topic, msg.partition, msg.offset, exc)  # fmt: skip
                headers.append((kafka.H_VALUE_OMITTED, b"1"))
                value = None
                await self._retry(
                    "DLQ produce",
                    lambda: self.producer.send_and_wait(
                        self.dlq_topic, value, key=kafka.dlq_key(msg), headers=headers
                    ),
                )
            metrics.DLQ_MESSAGES.labels(component=self.component, reason=reason).inc()
        tracing.decide(
            tracing.current(), "dead_lettered", rename=False, dlq_reason=reason, dlq_detail=detail
        )
        self.stats.dlq += 1
        log.info(
            "dead-lettered %s[%d]@%d: %s (%s)", msg.topic, msg.partition, msg.offset, reason, detail
        )

    async def flush_ledger(self) -> None:
        """Write pending ledger rows; raises on failure (the caller then does not commit)."""
        if self.ledger is None or not self.pending_ledger:
            self.pending_ledger.clear()
            return
        entries, self.pending_ledger = self.pending_ledger, []
        try:
            await self.ledger.record(entries)
        except BaseException:
            self.pending_ledger = entries + self.pending_ledger
            raise

    async def _retry(self, what: str, fn):  # type: ignore[no-untyped-def]
        return await until_done(what, fn, retriable=_transient, stopping=self.stopping)


def _run_attrs(run: RunActivityInput) -> dict[str, Any]:
    """What a run's decision span records (``ingest.*``)."""
    return {"workflow_id": run.workflow_id, "activity_id": run.activity_id,
            "event_id": run.event_id}  # fmt: skip


def _what(exc: BaseException) -> str:
    """``Class: text`` of an error, short enough for a DLQ header."""
    return f"{type(exc).__name__}: {exc}"[:500]


def _transient(exc: Exception) -> bool:
    if isinstance(exc, OSError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, asyncpg.PostgresConnectionError | asyncpg.InterfaceError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        return getattr(exc, "sqlstate", "")[:2] in ("08", "53", "57", "40")
    return kafka.is_retriable(exc)


def build_routing(
    settings: Settings,
    rcfg: RouterSettings,
    *,
    client: Client,
    pool: asyncpg.Pool,
    catalog: ActivityCatalog,
    producer: AIOKafkaProducer,
    on_done: Callable[[TopicPartition, int], None],
    stopping: Callable[[], bool],
    dry_run: bool = False,
    component: str = "router",
    group: str | None = None,
    trace_links: list[Any] | None = None,
) -> Routing:
    """The Routing of the live router and of every replay, from their settings.

    Replays use component ``router`` too: messages a replay dead-letters are router
    rejections, and ``replay --dlq`` must route them again.
    """
    return Routing(
        planner=RoutePlanner(catalog, rcfg.max_event_bytes),
        starter=Starter(
            client, settings.temporal.task_queue, component=component, stopping=stopping
        ),
        producer=producer,
        gate=FlowGate(FlowStore(pool), client),
        order=OrderLines(pool),
        cancels=Cancels(pool, client),
        dlq_topic=settings.kafka.dlq_topic,
        ledger=Ledger(pool) if rcfg.ledger else None,
        concurrency=rcfg.concurrency,
        on_done=on_done,
        stopping=stopping,
        component=component,
        dry_run=dry_run,
        group=group,
        trace_links=trace_links or [],
        windows=Windows(
            pool=pool,
            client=client,
            task_queue=settings.temporal.task_queue,
            catalog=catalog,
            stopping=stopping,
            component=component,
        ),
    )
