"""The pipeline-wide half of the invariant: processes alive, the pipeline idle, offsets
committed to the end, no run still running, the unmatched count.

:class:`Processes` runs the real ``ingress``, ``router`` and ``worker`` through the
fault harness (``tests.faults.harness.Pipeline``); a process that exits is a
violation (with its log), and is restarted (at most :data:`MAX_RESTARTS` times per
kind) so that the rest of the run can still be judged.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx

from tests.faults import harness as h
from tests.fuzz.invariant import Judge, Rec
from tests.support import kafka, metrics
from tests.support.wait import eventually

MAX_RESTARTS = 3
KINDS = ("ingress", "worker", "router")
QUIET_SECONDS = 3.0
RUNNING = (
    "TaskQueue = '{tq}' AND WorkflowType = 'RunActivityWorkflow' AND ExecutionStatus = 'Running'"
)


class Processes:
    def __init__(self, pipe: h.Pipeline, judge: Judge) -> None:
        self.pipe = pipe
        self.judge = judge
        self.children: dict[str, h.Child] = {}
        self.restarts: Counter[str] = Counter()
        self._reported: set[int] = set()

    async def start(self) -> None:
        for kind in KINDS:
            self.children[kind] = await self.pipe.spawn(kind, metrics=True)
        for child in self.children.values():
            await eventually(child.ready, 90, f"the {child.kind} to be ready")

    async def check(self) -> None:
        """A process that exited is a violation (once); restart it (bounded)."""
        for kind, child in list(self.children.items()):
            if child.alive or id(child) in self._reported:
                continue
            self._reported.add(id(child))
            code = child.proc.returncode if child.proc else None
            self.judge.violation(
                "process_exit", f"{kind} exited with code {code}; its log ends:\n{child.log(3000)}"
            )
            if self.restarts[kind] < MAX_RESTARTS:
                self.restarts[kind] += 1
                self.children[kind] = await self.pipe.restart(child)

    @property
    def given_up(self) -> list[str]:
        """Kinds that exited again after MAX_RESTARTS restarts: judging more is pointless."""
        return [k for k, c in self.children.items() if not c.alive]


@dataclass
class Stuck:
    """What a previous round already reported, so later rounds do not wait on it again."""

    runs: set[str]
    windows: set[int]
    groups: set[str]
    partitions: set[str]


async def _snapshot(
    pipe: h.Pipeline, pool: asyncpg.Pool, temporal: Any, stuck: Stuck
) -> tuple[Any, bool]:
    bootstrap, t = pipe.ep.kafka, pipe.topics
    committed = (
        await kafka.committed(bootstrap, pipe.ingress_group, t.raw),
        await kafka.committed(bootstrap, pipe.router_group, t.events),
    )
    ends = (await kafka.end_offsets(bootstrap, t.raw), await kafka.end_offsets(bootstrap, t.events))
    behind = {
        group
        for group, done, end in zip(("ingress", "router"), committed, ends, strict=True)
        if any((done.get(p) or 0) < e for p, e in end.items())
    }
    running = {
        r["workflow_id"]
        for r in await pool.fetch("SELECT workflow_id FROM activity_runs WHERE status = 'running'")
    }
    running |= {w.id async for w in temporal.list_workflows(RUNNING.format(tq=pipe.task_queue))}
    windows = {
        r["id"] for r in await pool.fetch("SELECT id FROM flow_windows WHERE state <> 'started'")
    }
    counts = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM activity_runs) AS runs,"
        " (SELECT count(*) FROM routed_triggers) AS ledger,"
        " (SELECT count(*) FROM flow_decisions) AS decisions,"
        " (SELECT count(*) FROM flow_members) AS members"
    )
    dlq = await kafka.count(bootstrap, t.dlq)
    state = (committed, ends, sorted(running), sorted(windows), tuple(counts), dlq)
    idle = (
        not (behind - stuck.groups) and not (running - stuck.runs) and not (windows - stuck.windows)
    )
    return state, idle


async def settle(
    procs: Processes, pool: asyncpg.Pool, temporal: Any, stuck: Stuck, timeout: float
) -> float:
    """Wait until the pipeline is idle and nothing changed for QUIET_SECONDS, at most
    ``timeout`` seconds; the seconds it took (``timeout`` or more: it never settled)."""
    t0 = time.monotonic()
    last: Any = None
    since = t0
    while time.monotonic() - t0 < timeout:
        await procs.check()
        state, idle = await _snapshot(procs.pipe, pool, temporal, stuck)
        now = time.monotonic()
        if state != last:
            last, since = state, now
        elif idle and now - since >= QUIET_SECONDS:
            return now - t0
        await asyncio.sleep(0.5)
    return time.monotonic() - t0


async def offsets(procs: Processes, judge: Judge, stuck: Stuck) -> None:
    """Both groups committed to the end of every partition; else name the record held."""
    pipe = procs.pipe
    for kind, group, topic in (
        ("ingress", pipe.ingress_group, pipe.topics.raw),
        ("router", pipe.router_group, pipe.topics.events),
    ):
        done = await kafka.committed(pipe.ep.kafka, group, topic)
        for p, end in (await kafka.end_offsets(pipe.ep.kafka, topic)).items():
            at = done.get(p) or 0
            if at >= end:
                continue
            rec: Rec | None
            if kind == "ingress":
                rec = judge.raw.get((p, at))
            else:
                ev = judge.events.get((p, at))
                rec = judge.raw.get(ev.raw) if ev and ev.raw else None
            where = f"events[{p}]@{at}" if kind == "router" else f"raw[{p}]@{at}"
            key = f"{kind}:{p}:{at}"
            if key in stuck.partitions:
                continue
            stuck.partitions.add(key)
            stuck.groups.add(kind)
            judge.violation(
                "offsets_behind",
                f"the {kind} group committed offset {at} of {end} on {topic}[{p}]: the record"
                f" at {where} holds the partition back",
                [rec] if rec else [],
            )


async def stuck_runs(
    procs: Processes,
    pool: asyncpg.Pool,
    temporal: Any,
    judge: Judge,
    owners: dict[str, list[Rec]],
    stuck: Stuck,
    waited: float,
) -> None:
    """No run still running, no window unstarted, once the pipeline stopped moving."""
    pipe = procs.pipe
    rows = await pool.fetch("SELECT workflow_id FROM activity_runs WHERE status = 'running'")
    in_pg = {r["workflow_id"] for r in rows}
    in_temporal = {w.id async for w in temporal.list_workflows(RUNNING.format(tq=pipe.task_queue))}
    for wid in sorted((in_pg | in_temporal) - stuck.runs):
        stuck.runs.add(wid)
        where = " and ".join(
            w
            for w, yes in (("activity_runs", wid in in_pg), ("Temporal", wid in in_temporal))
            if yes
        )
        tasks = await pool.fetch(
            "SELECT t.id, t.status, t.attempts, left(t.last_error, 300) AS err"
            " FROM task_instances t JOIN activity_runs r ON r.run_id = t.run_id"
            " WHERE r.workflow_id = $1",
            wid,
        )
        judge.violation(
            "run_stuck",
            f"run {wid} still running in {where} after {waited:.0f}s; tasks: "
            + (", ".join(f"{t['status']} x{t['attempts']} {t['err']!r}" for t in tasks) or "none"),
            owners.get(wid, []),
        )
    rows = await pool.fetch(
        "SELECT w.id, w.kind, w.state, w.size, w.closed_by, w.run_workflow_id,"
        " array_agg(m.activity_id::text || ':' || m.event_id) AS members"
        " FROM flow_windows w LEFT JOIN flow_members m ON m.window_id = w.id"
        " WHERE w.state <> 'started' GROUP BY w.id"
    )
    for r in rows:
        if r["id"] in stuck.windows:
            continue
        stuck.windows.add(r["id"])
        recs = [rec for m in r["members"] or [] if m for rec in owners.get(f"member:{m}", [])]
        judge.violation(
            "window_stuck",
            f"{r['kind']} window {r['id']} still {r['state']} (closed by {r['closed_by']},"
            f" {r['size']} members, run {r['run_workflow_id']}) after {waited:.0f}s",
            recs,
        )


async def unmatched(procs: Processes, judge: Judge) -> str:
    """The router counted every unmatched record; returns a note on the metric's series."""
    router = procs.children["router"]
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{router.metrics_port}/metrics", timeout=5)).text
    name = "pipeline_events_unmatched_total"
    try:
        counted = metrics.parse(text, name, missing_ok=True)
    except AssertionError as exc:
        judge.violation("unmatched_count", f"the router exposes no {name}: {exc}")
        return ""
    series = sum(1 for line in text.splitlines() if line.startswith(name))
    if procs.restarts["router"]:
        return f"{name}: not compared (the router restarted)"
    if counted != judge.unmatched:
        judge.violation(
            "unmatched_count",
            f"the router counted {counted:.0f} unmatched events; {judge.unmatched} records"
            " were neither run nor dead-lettered and have no subscriber",
        )
    return f"{name}: {counted:.0f} counted in {series} series"


async def terminate_left(temporal: Any, task_queue: str) -> None:
    """Leave the shared server as found: end what is still running on our queue."""
    query = f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"
    async for w in temporal.list_workflows(query):
        try:
            await temporal.get_workflow_handle(w.id, run_id=w.run_id).terminate("fuzz test ended")
        except Exception:
            pass  # it ended meanwhile


async def failed_runs(pool: asyncpg.Pool) -> list[str]:
    """Runs that ended ``failed``, by the error of their failed task (a run that failed
    its planning has no task row): the report lists them, they are not violations."""
    rows = await pool.fetch(
        "SELECT coalesce(left(t.last_error, 140), '(no task failed: planning, see Temporal)')"
        " AS err, count(DISTINCT r.run_id) AS n FROM activity_runs r"
        " LEFT JOIN task_instances t ON t.run_id = r.run_id AND t.status <> 'succeeded'"
        " WHERE r.status = 'failed' GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
    )
    return [f"  {r['n']} x {r['err']!r}" for r in rows]
