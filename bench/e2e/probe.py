"""Where a phase's cost goes: CPU seconds per process group, and history shape per run.

CPU comes from ``/proc/<pid>/stat`` (utime+stime, plus reaped children for the
PostgreSQL postmaster), sampled before and after a phase; on a shared machine the
server groups include other users' load, so read them as upper bounds. History
shape comes from the runs' own event histories (``fetch_history``): events, workflow
tasks, activity tasks and local-activity markers, summed over the parent and its
children, and their state transitions (each execution's ``state_transition_count``
from DescribeWorkflowExecution: one per persisted mutable-state write).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

_TICK = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")


def _cmdline(pid: str) -> str:
    try:
        return (_PROC / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ticks(pid: int | str, children: bool = False) -> int:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return 0
    fields = stat.rpartition(")")[2].split()
    # fields[11..14] = utime, stime, cutime, cstime (stat fields 14-17)
    used = int(fields[11]) + int(fields[12])
    return used + (int(fields[13]) + int(fields[14]) if children else 0)


def find_pids(temporal_port: int) -> dict[str, list[int]]:
    """The stack's Temporal dev server, PostgreSQL and Kafka processes (read-only look-up).

    Kafka is every broker JVM on the machine (``kafka.Kafka``): the stack runs one,
    and nothing else should run during a benchmark.
    """
    groups: dict[str, list[int]] = {"temporal": [], "postgres": [], "kafka": []}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        cmd = _cmdline(entry.name)
        if "start-dev" in cmd and f"--port {temporal_port}" in cmd:
            groups["temporal"].append(int(entry.name))
        elif cmd.split(" ", 1)[0].rstrip(":").endswith("postgres"):
            groups["postgres"].append(int(entry.name))
        elif " kafka.Kafka " in f" {cmd} ":
            groups["kafka"].append(int(entry.name))
    return groups


class CpuMeter:
    """CPU seconds used by each group of processes between ``start`` and ``stop``."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = {name: list(pids) for name, pids in groups.items()}
        self._before: dict[str, int] = {}

    def add(self, name: str, pids: Iterable[int]) -> None:
        self.groups[name] = list(pids)

    def _now(self) -> dict[str, int]:
        out = {"bench process": _ticks(os.getpid())}
        for name, pids in self.groups.items():
            out[name] = sum(_ticks(p, children=name == "postgres") for p in pids)
        return out

    def start(self) -> None:
        self._before = self._now()

    def stop(self) -> dict[str, float]:
        now = self._now()
        return {k: round((now[k] - self._before.get(k, 0)) / _TICK, 2) for k in now}


_MARKER = EventType.EVENT_TYPE_MARKER_RECORDED
_WFT = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
_ACT = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


async def history_shape(client: Client, workflow_ids: Iterable[str]) -> dict[str, int]:
    """Events, workflow tasks, activity tasks, markers and state transitions summed
    over ``workflow_ids``."""
    total: Counter[str] = Counter()
    for wid in workflow_ids:
        handle = client.get_workflow_handle(wid)
        history = await handle.fetch_history()
        described = await handle.describe()
        total["workflows"] += 1
        total["state_transitions"] += (
            described.raw_description.workflow_execution_info.state_transition_count
        )
        for ev in history.events:
            total["events"] += 1
            total["workflow_tasks"] += ev.event_type == _WFT
            total["activity_tasks"] += ev.event_type == _ACT
            total["local_activity_markers"] += ev.event_type == _MARKER
    return dict(total)
