"""The fuzzer's invariant, checked per raw record, and what it found.

For every record the broker accepted on the raw topic, exactly one of:

(a) **a run**: an ``activity_runs`` row or a ``routed_triggers`` ledger row of the
    run its event triggers, a flow decision that skipped it (``flow_decisions``,
    rate_limit or singleton), or membership of a debounce window or batch that
    started its run;
(b) **a DLQ record** with a documented ``dlq_reason`` (the reasons ingress and the
    router declare: ``ingress.service.DLQ_REASONS``, ``router.service.DLQ_REASONS``,
    themselves read from the ``R_*`` constants of the code), whose ``dlq_source_*``
    headers name the record (ingress) or its event (router);
(c) **an unmatched event**: its type has no subscriber and the router counted it
    (the sum of ``pipeline_events_unmatched_total`` equals the number of such records).

Records are followed by their coordinates: a raw record's ``(partition, offset)``;
its event on the events topic carries them in the ``ingress_source`` header; a DLQ
record in ``dlq_source_*``; a ledger row and a window member carry their event's.
Besides, per round: no pipeline process exits, the ingress and router groups commit
to the end of every partition, and no run is still running once the pipeline is idle.

A violation keeps the records it is about; :meth:`Violation.render` prints their key,
value and headers (``repr``, long ones cut, with their full size).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson

from tests.fuzz.activities import FuzzActivity
from tests.fuzz.strategies import FuzzRecord

# How much of a value, key or header is kept per record (the digest covers all of it).
KEEP = 16 * 1024
SHOW = 600  # bytes of a key or value a violation prints (of a header value: SHOW_HEADER)
SHOW_HEADER = 120
# Documented reasons that say "a bug in the pipeline, not in the input" (their details
# are listed in the report): ingress.records.R_INTERNAL, router.routing.R_ROUTE_FAILED.
BUG_REASONS = ("ingress_error", "route_failed")
# Lines of the fuzz report, printed at the end of the session (tests/fuzz/conftest.py).
REPORT: list[str] = []


OMITTED = "dlq_value_omitted"  # pipeline.kafka.H_VALUE_OMITTED: a DLQ record without value
# pipeline.kafka.H_HEADERS_OMITTED: without the producer's key and headers as well, so
# only its dlq_source_* headers say which record it stands for.
HEADERS_OMITTED = "dlq_headers_omitted"


def digest(key: bytes | None, value: bytes | None, headers: Any, omit_value: bool = False) -> str:
    """What a DLQ record keeps of a record: its key, its value (unless Kafka refused it
    with the value, ``omit_value``) and its headers but ``dlq_*`` ones (a header's
    null value becomes empty, as ``pipeline.kafka.dlq_headers`` does)."""
    h = hashlib.sha256()
    for part in (key, b"<omitted>" if omit_value else value):
        h.update(b"-" if part is None else b"+%d:" % len(part) + part)
    for name, v in headers or ():
        if isinstance(name, str) and not name.startswith("dlq_"):
            raw = name.encode("utf-8", "surrogatepass")
            h.update(b"%d:%s=%d:" % (len(raw), raw, len(v or b"")) + bytes(v or b""))
    return h.hexdigest()


def documented_reasons() -> dict[str, frozenset[str]]:
    """The DLQ reasons each component declares, read from the code (never a list here)."""
    from ingress import service as ingress_service
    from router import service as router_service

    return {
        "ingress": frozenset(ingress_service.DLQ_REASONS),
        "router": frozenset(router_service.DLQ_REASONS),
    }


def _cut(b: bytes | None, show: int = SHOW) -> str:
    if b is None:
        return "None"
    text = repr(b[:show])
    return text if len(b) <= show else f"{text}... ({len(b)} bytes)"


@dataclass
class Rec:
    """One raw record as the broker holds it (values longer than KEEP are cut)."""

    round: int
    index: int
    kind: str
    mods: tuple[str, ...]
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    size: int
    digest: str
    headers: list[tuple[str, bytes | None]]
    digest_nv: str = ""  # without the value (matches a DLQ record that omitted it)
    # A record without a key: its DLQ copy may carry its coordinates as key instead
    # (pipeline.kafka.dlq_key: neither key nor value; a keyless copy without its value).
    digest_ck: tuple[str, ...] = ()

    @property
    def coords(self) -> tuple[int, int]:
        return self.partition, self.offset

    def show(self) -> str:
        hdrs = ", ".join(f"({n[:80]!r}, {_cut(v, SHOW_HEADER)})" for n, v in self.headers)
        return (
            f"  record raw[{self.partition}]@{self.offset} (round {self.round} #{self.index},"
            f" kind {self.kind}{', ' + '+'.join(self.mods) if self.mods else ''})\n"
            f"    key     {_cut(self.key)}\n"
            f"    value   {_cut(self.value)}"
            + (f" (size {self.size})" if self.size > SHOW else "")
            + f"\n    headers [{hdrs}]"
        )


@dataclass
class Event:
    """A stamped event on the events topic."""

    partition: int
    offset: int
    raw: tuple[int, int] | None  # from ingress_source
    event_id: str | None
    type: str | None
    digest: str
    problem: str | None = None
    digest_nv: str = ""


@dataclass
class Dead:
    """A DLQ record."""

    partition: int
    offset: int
    component: str
    reason: str
    detail: str
    source: tuple[str, int, int] | None
    digest: str
    raw_source: tuple[Any, ...] = (None, None, None)  # the dlq_source_* headers as they are
    bare: bool = False  # sent with its dlq_* headers alone: nothing to compare

    def names(self) -> str:
        return "dlq_source_topic/partition/offset " + "/".join(_cut(v, 40) for v in self.raw_source)


@dataclass
class Violation:
    category: str
    message: str
    records: list[Rec] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"[{self.category}] {self.message}"]
        lines += [r.show() for r in self.records[:5]]
        if len(self.records) > 5:
            lines.append(f"  ... and {len(self.records) - 5} more records")
        return "\n".join(lines)


def _header(headers: Iterable[tuple[str, Any]] | None, name: str, last: bool = False) -> Any:
    found = None
    for k, v in headers or ():
        if k == name:
            if not last:
                return v
            found = v
    return found


def _coords(text: bytes | None) -> tuple[str, int, int] | None:
    try:
        topic, p, o = (text or b"").decode().rsplit("/", 2)
        return topic, int(p), int(o)
    except (UnicodeDecodeError, ValueError):
        return None


@dataclass
class Evidence:
    """What PostgreSQL holds about the runs of a set of events."""

    runs: dict[str, str] = field(default_factory=dict)  # workflow id -> status
    ledger: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    decisions: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    # (activity id, event id) -> (event partition, offset, window state, run workflow id)
    members: dict[tuple[str, str], tuple[int, int, str, str | None]] = field(default_factory=dict)


def run_id(act: FuzzActivity, event_id: str) -> str:
    from schemas import ids

    return ids.event_workflow_id(act.activity_id, event_id)


def _storable(s: str) -> bool:
    return "\x00" not in s  # PostgreSQL text refuses NUL: such an id cannot have a row


async def evidence(pool: asyncpg.Pool, pairs: list[tuple[FuzzActivity, str]]) -> Evidence:
    """The rows of the runs of ``pairs`` (activity, event id)."""
    ev = Evidence()
    wids = sorted({run_id(a, e) for a, e in pairs if not a.windowed and _storable(e)})
    rows = await pool.fetch(
        "SELECT workflow_id, status FROM activity_runs WHERE workflow_id = ANY($1::text[])", wids
    )
    ev.runs.update((r["workflow_id"], r["status"]) for r in rows)
    for r in await pool.fetch(
        "SELECT workflow_id, source_topic, source_partition, source_offset FROM routed_triggers"
        " WHERE workflow_id = ANY($1::text[])",
        wids,
    ):
        ev.ledger[r["workflow_id"]] = (r["source_topic"], r["source_partition"], r["source_offset"])
    for r in await pool.fetch(
        "SELECT workflow_id, outcome, reason FROM flow_decisions"
        " WHERE workflow_id = ANY($1::text[])",
        wids,
    ):
        ev.decisions[r["workflow_id"]] = (r["outcome"], r["reason"])
    windowed = [(a.activity_id, e) for a, e in pairs if a.windowed and _storable(e)]
    if windowed:
        rows = await pool.fetch(
            "SELECT m.activity_id::text AS aid, m.event_id, m.source_partition,"
            " m.source_offset, w.state, w.run_workflow_id FROM flow_members m"
            " JOIN flow_windows w ON w.id = m.window_id"
            " WHERE (m.activity_id, m.event_id) IN"
            " (SELECT * FROM unnest($1::uuid[], $2::text[]))",
            [a for a, _ in windowed],
            [e for _, e in windowed],
        )
        for r in rows:
            ev.members[(r["aid"], r["event_id"])] = (
                r["source_partition"], r["source_offset"], r["state"], r["run_workflow_id"]
            )  # fmt: skip
        run_wids = sorted({m[3] for m in ev.members.values() if m[3]})
        rows = await pool.fetch(
            "SELECT workflow_id, status FROM activity_runs WHERE workflow_id = ANY($1::text[])",
            run_wids,
        )
        ev.runs.update((r["workflow_id"], r["status"]) for r in rows)
    return ev


class Judge:
    """Everything seen on the three topics, across rounds, and the verdicts."""

    def __init__(
        self, raw_topic: str, events_topic: str, activities: dict[str, FuzzActivity]
    ) -> None:
        self.raw_topic = raw_topic
        self.events_topic = events_topic
        self.activities = activities
        self.reasons = documented_reasons()
        self.raw: dict[tuple[int, int], Rec] = {}
        self.by_digest: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.events: dict[tuple[int, int], Event] = {}
        self.event_digest: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.events_of: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        self.ingress_dlq: dict[tuple[int, int], list[Dead]] = defaultdict(list)
        self.router_dlq: dict[tuple[int, int], list[Dead]] = defaultdict(list)
        self.wid_events: Counter[str] = Counter()
        self.judged: set[int] = set()
        self.violations: list[Violation] = []
        self.kinds: Counter[str] = Counter()
        self.mods: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.by_kind: dict[str, Counter[str]] = defaultdict(Counter)
        # DLQ reasons that name a bug, not the input: their details, counted.
        self.bugs: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.unmatched = 0

    def violation(self, category: str, message: str, records: Iterable[Rec] = ()) -> None:
        self.violations.append(Violation(category, message, list(records)))

    # --- what the topics hold ----------------------------------------------------------

    def add_raw(
        self, rnd: int, batch: list[FuzzRecord], coords: list[Any], msgs: list[Any]
    ) -> list[Rec]:
        """The round's records as read back from the raw topic; returns them."""
        at = {(m.partition, m.offset): m for m in msgs}
        out: list[Rec] = []
        for i, (fr, c) in enumerate(zip(batch, coords, strict=True)):
            if c is None:
                continue
            m = at.get(c)
            if m is None:
                raise AssertionError(f"record {i} acknowledged at {c} but not on the raw topic")
            headers = [(k, None if v is None else bytes(v[:KEEP])) for k, v in m.headers or ()]
            value = m.value
            rec = Rec(
                rnd, i, fr.kind, fr.mods, m.partition, m.offset,
                None if m.key is None else bytes(m.key[:KEEP]),
                None if value is None else bytes(value[:KEEP]),
                len(value or b""), digest(m.key, value, m.headers), headers,
                digest(m.key, value, m.headers, omit_value=True),
            )  # fmt: skip
            if m.key is None:
                ck = f"{m.topic}/{m.partition}@{m.offset}".encode()
                rec.digest_ck = (
                    digest(ck, value, m.headers),
                    digest(ck, value, m.headers, omit_value=True),
                )
            self.raw[rec.coords] = rec
            self.by_digest[rec.digest].append(rec.coords)
            self.by_digest[rec.digest_nv].append(rec.coords)
            for d in rec.digest_ck:
                self.by_digest[d].append(rec.coords)
            self.kinds[rec.kind] += 1
            self.mods.update(rec.mods)
            out.append(rec)
        return out

    def _late(self, rec: Rec | None, what: str) -> None:
        if rec is not None and rec.round in self.judged:
            self.violation(
                "late_outcome", f"{what} appeared after round {rec.round} was judged", [rec]
            )

    def add_events(self, msgs: list[Any]) -> None:
        for m in msgs:
            raw = _coords(_header(m.headers, "ingress_source", last=True))
            ev = Event(
                m.partition, m.offset, None, None, None, digest(m.key, m.value, m.headers),
                digest_nv=digest(m.key, m.value, m.headers, omit_value=True),
            )  # fmt: skip
            if raw is None or raw[0] != self.raw_topic:
                ev.problem = f"ingress_source header {_header(m.headers, 'ingress_source')!r}"
            else:
                ev.raw = raw[1:]
            try:
                doc = orjson.loads(m.value)
                ev.event_id, ev.type = doc.get("event_id"), doc.get("type")
            except (orjson.JSONDecodeError, TypeError, AttributeError) as exc:
                ev.problem = f"the event does not parse: {exc}"
            self.events[(m.partition, m.offset)] = ev
            self.event_digest[ev.digest].append((m.partition, m.offset))
            self.event_digest[ev.digest_nv].append((m.partition, m.offset))
            if ev.problem is not None or ev.raw is None:
                self.violation(
                    "bad_event",
                    f"events[{m.partition}]@{m.offset}: {ev.problem}; value {_cut(m.value)}",
                )
                continue
            self.events_of[ev.raw].append((m.partition, m.offset))
            act = self.activities.get(ev.type or "")
            if act is not None and isinstance(ev.event_id, str):
                self.wid_events[run_id(act, ev.event_id)] += 1
            self._late(self.raw.get(ev.raw), f"its event events[{m.partition}]@{m.offset}")

    def add_dlq(self, msgs: list[Any]) -> None:
        for m in msgs:
            h = m.headers
            src = h and _header(h, "dlq_source_topic")
            try:
                source = (
                    (src or b"").decode(),
                    int(_header(h, "dlq_source_partition") or b"-1"),
                    int(_header(h, "dlq_source_offset") or b"-1"),
                )
            except (UnicodeDecodeError, ValueError):
                source = None
            d = Dead(
                m.partition, m.offset,
                (_header(h, "dlq_component") or b"").decode(errors="replace"),
                (_header(h, "dlq_reason") or b"").decode(errors="replace"),
                (_header(h, "dlq_detail") or b"").decode(errors="replace"),
                source, digest(m.key, m.value, h, omit_value=_header(h, OMITTED) is not None),
                tuple(_header(h, f"dlq_source_{n}") for n in ("topic", "partition", "offset")),
                _header(h, HEADERS_OMITTED) is not None,
            )  # fmt: skip
            if d.component == "ingress":
                self._ingress_dead(d)
            else:
                self._router_dead(d, m)

    def _ingress_dead(self, d: Dead) -> None:
        claimed = d.source[1:] if d.source and d.source[0] == self.raw_topic else None
        rec = self.raw.get(claimed) if claimed else None
        if rec is None or not (d.bare or d.digest in (rec.digest, rec.digest_nv, *rec.digest_ck)):
            matches = self.by_digest.get(d.digest, [])
            free = [c for c in matches if not self.ingress_dlq.get(c)] or matches
            rec = self.raw.get(free[0]) if free else None
            self.violation(
                "dlq_coordinates",
                f"DLQ record dlq[{d.partition}]@{d.offset} ({d.component}, {d.reason}) says"
                f" {d.names()}: not the raw record it holds"
                + ("" if rec else " (and its bytes match no record)"),
                [rec] if rec else [],
            )
            if rec is None:
                return
        self.ingress_dlq[rec.coords].append(d)
        self._late(rec, f"DLQ record dlq[{d.partition}]@{d.offset}")

    def _router_dead(self, d: Dead, m: Any) -> None:
        claimed = d.source[1:] if d.source and d.source[0] == self.events_topic else None
        ev = self.events.get(claimed) if claimed else None
        if ev is None or not (d.bare or d.digest in (ev.digest, ev.digest_nv)):
            matches = self.event_digest.get(d.digest, [])
            ev = self.events.get(matches[0]) if matches else None
            rec = self.raw.get(ev.raw) if ev and ev.raw else None
            self.violation(
                "dlq_coordinates",
                f"DLQ record dlq[{d.partition}]@{d.offset} ({d.component}, {d.reason}) says"
                f" {d.names()}: not the event it holds"
                + ("" if ev else f" (and its bytes match no event; value {_cut(m.value)})"),
                [rec] if rec else [],
            )
            if ev is None:
                return
        if ev.raw is None:
            return
        self.router_dlq[ev.raw].append(d)
        self._late(self.raw.get(ev.raw), f"DLQ record dlq[{d.partition}]@{d.offset}")

    # --- the verdict of one round -----------------------------------------------------------

    def pairs(self, recs: list[Rec]) -> list[tuple[FuzzActivity, str]]:
        out = []
        for rec in recs:
            for ec in self.events_of.get(rec.coords, []):
                ev = self.events[ec]
                act = self.activities.get(ev.type or "")
                if act is not None and isinstance(ev.event_id, str):
                    out.append((act, ev.event_id))
        return out

    def owners(self, recs: list[Rec], ev: Evidence) -> dict[str, list[Rec]]:
        """The records behind each run id, window run id and ``member:{activity}:{event}``."""
        out: dict[str, list[Rec]] = defaultdict(list)
        for rec in recs:
            for ec in self.events_of.get(rec.coords, []):
                e = self.events[ec]
                act = self.activities.get(e.type or "")
                if act is None or not isinstance(e.event_id, str):
                    continue
                if act.windowed:
                    out[f"member:{act.activity_id}:{e.event_id}"].append(rec)
                    m = ev.members.get((act.activity_id, e.event_id))
                    if m is not None and m[3]:
                        out[m[3]].append(rec)
                else:
                    out[run_id(act, e.event_id)].append(rec)
        return out

    def judge(self, rnd: int, recs: list[Rec], ev: Evidence, crashed: bool = False) -> None:
        """Exactly one outcome per record of round ``rnd``. ``crashed``: a process exited
        during the round, so the same outcome twice is its redelivery (still a violation)."""
        self.judged.add(rnd)
        for rec in recs:
            outcomes, context = self._outcomes(rec, ev, crashed)
            for o in outcomes:
                self.outcomes[o] += 1
                self.by_kind[rec.kind][o.split(",")[0]] += 1
            if not outcomes:
                self.violation(
                    "no_outcome", f"no run, no DLQ record, not unmatched: {context}", [rec]
                )
            elif len(outcomes) > 1:
                again = crashed and len(set(outcomes)) == 1
                self.violation(
                    "redelivered_after_exit" if again else "two_outcomes",
                    f"{len(outcomes)} outcomes: {outcomes}",
                    [rec],
                )

    def _outcomes(self, rec: Rec, ev: Evidence, crashed: bool) -> tuple[list[str], str]:
        outcomes: list[str] = []
        context: list[str] = []
        for d in self.ingress_dlq.get(rec.coords, []):
            outcomes.append(self._dlq(d, rec))
        events = self.events_of.get(rec.coords, [])
        if not events and not outcomes:
            context.append("ingress forwarded nothing and dead-lettered nothing")
        if len(events) > 1:
            category = "redelivered_after_exit" if crashed else "forwarded_twice"
            self.violation(category, f"ingress forwarded it {len(events)} times", [rec])
        router_dlq = self.router_dlq.get(rec.coords, [])
        for d in router_dlq:
            outcomes.append(self._dlq(d, rec))
        for ec in events:
            e = self.events[ec]
            act = self.activities.get(e.type or "")
            if act is None:
                if not router_dlq:
                    outcomes.append("unmatched")
                    self.unmatched += 1
                continue
            eid = e.event_id if isinstance(e.event_id, str) else ""
            run, owned, why = self._run(act, eid, ec, ev)
            context.append(f"event events[{ec[0]}]@{ec[1]} type {e.type!r}: {why}")
            if run is None:
                continue
            # A run of the same id owned by another record (a shared event id) is not
            # this record's when this one was dead-lettered.
            if router_dlq and (owned is False or (owned is None and self._shared(act, eid))):
                continue
            outcomes.append(run)
        return outcomes, "; ".join(context)

    def _shared(self, act: FuzzActivity, eid: str) -> bool:
        return self.wid_events[run_id(act, eid)] > 1

    def _dlq(self, d: Dead, rec: Rec) -> str:
        documented = self.reasons.get(d.component) or frozenset().union(*self.reasons.values())
        if d.reason not in documented:
            self.violation(
                "undocumented_reason",
                f"DLQ record dlq[{d.partition}]@{d.offset} of {d.component!r} has reason"
                f" {d.reason!r}, not one the code declares ({d.detail[:200]!r})",
                [rec],
            )
        if d.reason in BUG_REASONS:
            self.bugs[f"{d.component} {d.reason}: {d.detail[:160]}"] += 1
        return f"dlq {d.component}: {d.reason}"

    def _run(
        self, act: FuzzActivity, eid: str, ec: tuple[int, int], ev: Evidence
    ) -> tuple[str | None, bool | None, str]:
        """(outcome, whether this event owns it, what was found)."""
        if not eid or not _storable(eid):
            return None, None, f"event id {eid[:80]!r} cannot have a run"
        if act.windowed:
            m = ev.members.get((act.activity_id, eid))
            if m is None:
                return None, None, f"not a member of any {act.name} window"
            owned = (m[0], m[1]) == ec
            status = ev.runs.get(m[3] or "")
            what = f"member of a {act.name} window in state {m[2]}, its run {m[3]} {status}"
            if m[2] != "started" or status is None:
                return None, owned, what
            return f"run: {act.name} window, {status}", owned, what
        wid = run_id(act, eid)
        decision = ev.decisions.get(wid)
        if decision is not None and decision[0] == "skip":
            return f"run: skipped by {decision[1]}", None, f"{wid} skipped ({decision[1]})"
        led = ev.ledger.get(wid)
        status = ev.runs.get(wid)
        mine = None if led is None else (led[0] == self.events_topic and led[1:] == ec)
        what = f"{wid}: ledger {led}, activity_runs {status}, decision {decision}"
        if led is None and status is None:
            return None, mine, what
        return f"run: {act.name}, {status or 'no activity_runs row'}", mine, what

    # --- the report ----------------------------------------------------------------------------

    def summary(self) -> list[str]:
        def line(title: str, c: Counter[str]) -> str:
            return f"{title}: " + ", ".join(f"{k} {n}" for k, n in c.most_common())

        by_cat = Counter(v.category for v in self.violations)
        out = [
            f"records judged: {len(self.raw)};"
            f" refused by the client or the broker: {sum(self.refused.values())}",
            line("kinds tried", self.kinds),
            line("modifiers", self.mods),
            line("outcomes", self.outcomes),
            line("violations", by_cat) if by_cat else "violations: 0",
        ]
        if self.refused:
            out.append(line("refused", self.refused))
        out.append("outcomes per kind:")
        out += [
            f"  {kind} ({sum(c.values())}): " + ", ".join(f"{k} {n}" for k, n in c.most_common())
            for kind, c in sorted(self.by_kind.items())
        ]
        if self.bugs:
            out.append("DLQ records that name a bug (reason: detail, count):")
            out += [f"  {n} x {what}" for what, n in self.bugs.most_common(15)]
        return out
