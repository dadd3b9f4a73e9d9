"""The suite's own Temporal namespace on the shared dev server.

``make test`` must leave the ``default`` namespace, the one the README's Temporal UI
shows a newcomer, as it found it. So every session claims a namespace of its own
(:func:`claim`), registers it with the pipeline's search attributes (:func:`prepare`),
points every client and every process it starts at it (``TEMPORAL_NAMESPACE``), and at
the end terminates what is still running there (:func:`sweep`) and checks that
``default`` gained no workflow on the session's task queues (:func:`leaked_into`).

Two sessions at once (two checkouts on one stack) never share a namespace: a session
holds an exclusive lock on its namespace's file under the stack directory, and the
next one takes ``ingest-test-2``, and so on. The sweep therefore only ever touches the
session's own workflows. The namespaces are reused from one session to the next, so
their number stays at the number of sessions that ever ran at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError

from pipeline.temporal_setup import prepare_namespace

BASE = "ingest-test"
DEFAULT = "default"
# The dev server's own retention for `default`, which docs/router.md assumes:
# closed test runs disappear a day later.
RETENTION = timedelta(hours=24)
MOST = 16  # sessions at once on one stack


@dataclass(frozen=True)
class Claim:
    """A namespace this session holds until ``release``."""

    name: str
    lock: IO[str]

    def release(self) -> None:
        self.lock.close()  # closing the file drops the lock


def claim(lock_dir: Path) -> Claim:
    """The first of ``ingest-test``, ``ingest-test-2``, ... no other session holds."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    for i in range(1, MOST + 1):
        name = BASE if i == 1 else f"{BASE}-{i}"
        lock = (lock_dir / f"{name}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return Claim(name, lock)
    raise RuntimeError(f"{MOST} test sessions already hold a namespace under {lock_dir}")


async def prepare(address: str, namespace: str) -> Client:
    """Register ``namespace`` (idempotent) and the pipeline's search attributes in it
    (``pipeline.temporal_setup``, as ``ingest temporal setup`` does); a client on it."""
    client = await Client.connect(address, namespace=namespace)
    await prepare_namespace(
        client, namespace, RETENTION, "the test suite's namespace (tests/support/namespaces.py)"
    )
    return client


@dataclass(frozen=True)
class Swept:
    terminated: Counter[str]  # per task queue
    schedules: int


async def sweep(client: Client, reason: str = "left running by the test session") -> Swept:
    """Terminate every workflow still running in the client's namespace and delete its
    schedules (a schedule left behind would start more). Repeats until visibility,
    which is eventually consistent, lists nothing running."""
    schedules = 0
    async for s in await client.list_schedules():
        with contextlib.suppress(RPCError):  # deleted meanwhile
            await client.get_schedule_handle(s.id).delete()
            schedules += 1
    terminated = Counter[str]()
    for _ in range(10):
        running = [w async for w in client.list_workflows('ExecutionStatus="Running"')]
        if not running:
            break
        terminated += await _terminate(client, running, reason)
        await asyncio.sleep(0.5)
    return Swept(terminated, schedules)


async def _terminate(client: Client, runs: list[WorkflowExecution], reason: str) -> Counter[str]:
    """Terminate ``runs``; how many this call terminated, per task queue (a child that its
    parent's close policy terminated meanwhile answers NOT_FOUND, and is not counted)."""
    results = await asyncio.gather(
        *(client.get_workflow_handle(w.id, run_id=w.run_id).terminate(reason) for w in runs),
        return_exceptions=True,
    )
    return Counter(
        w.task_queue for w, r in zip(runs, results, strict=True) if not isinstance(r, BaseException)
    )


async def leaked_into(
    address: str, since: datetime, task_queues: Collection[str], namespace: str = DEFAULT
) -> list[tuple[str, str]]:
    """(workflow id, task queue) of the workflows started in ``namespace`` since ``since``
    on one of ``task_queues``: a session's own queues, so a pipeline someone runs on
    ``default`` meanwhile (``make run``) is not taken for a leak. The ones still running
    are terminated: being on the session's queues, they are the session's."""
    client = await Client.connect(address, namespace=namespace)
    found = [
        w
        async for w in client.list_workflows(f'StartTime >= "{since.isoformat()}"')
        if w.task_queue in task_queues
    ]
    running = [w for w in found if w.status == WorkflowExecutionStatus.RUNNING]
    await _terminate(client, running, "started in the wrong namespace by the test session")
    return [(w.id, w.task_queue) for w in found]


async def census(address: str, since: datetime, namespace: str = DEFAULT) -> Counter[str]:
    """Workflows started in ``namespace`` since ``since``, per status (``RUNNING``, ...):
    for the end-of-session line, which shows what ``default`` gained meanwhile on any
    queue (a benchmark cut short, a pipeline someone runs there), not only a leak."""
    client = await Client.connect(address, namespace=namespace)
    statuses = [
        w.status.name if w.status is not None else "UNKNOWN"
        async for w in client.list_workflows(f'StartTime >= "{since.isoformat()}"')
    ]
    return Counter(statuses)


def census_line(namespace: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    line = f"Temporal namespace {namespace}: {total} workflows started during the session"
    if total:
        by_count = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        line += " (" + ", ".join(f"{n} {s.lower()}" for s, n in by_count) + ")"
    return line


@dataclass(frozen=True)
class Session:
    """The shared stack's Temporal address and the namespace the session claimed there."""

    address: str
    namespace: str
    # handed out by the ``task_queue`` fixture: queue -> the test it was made for
    task_queues: dict[str, str] = field(default_factory=dict)


current: Session | None = None
"""Set by the ``stack`` fixture for the whole session (None outside one)."""


def namespace_for(address: str) -> str:
    """The namespace a process a test starts should use on ``address``: the session's on
    the shared stack; ``default`` on a private dev server a test started itself (it is
    thrown away, and has no other namespace)."""
    if current is not None and address == current.address:
        return current.namespace
    return DEFAULT


def summary(namespace: str, swept: Swept, tests: Mapping[str, str], top: int = 3) -> str:
    """One line: what the sweep terminated, and the tests that left the most behind."""
    total = sum(swept.terminated.values())
    line = (
        f"Temporal namespace {namespace}: terminated {total} workflows still running at the "
        f"end of the session, deleted {swept.schedules} schedules"
    )
    by_test = Counter[str]()
    for queue, n in swept.terminated.items():
        by_test[tests.get(queue, f"task queue {queue}")] += n
    if by_test:
        line += "; most from " + ", ".join(f"{t} ({n})" for t, n in by_test.most_common(top))
    return line
