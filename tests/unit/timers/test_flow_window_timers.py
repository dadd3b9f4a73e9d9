"""The window workflow's timers in workflow time (time-skipping test server): a debounce
closes ``period`` after its last new event, a repeated note does not push it back,
``max_wait`` caps a steady stream, a batch closes at once when full or at its timeout,
and windows carried over continue-as-new keep their deadlines.

The workflow is the production class; ``close_window`` is a fake under the production
name that records when and why the workflow closed each window (the real-stack tests,
tests/integration/flow, cover the database and the runs).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from schemas.flow.io import (
    CloseWindowInput,
    CloseWindowResult,
    FlowWindowInput,
    FlowWindowSignal,
    OpenWindow,
    WindowNote,
)
from schemas.ids import window_workflow_id
from workers.flow.part import WORKFLOW_MODULES
from workers.flow.window import FlowWindowWorkflow
from workers.sandbox import workflow_runner

AID = str(uuid.uuid4())


@dataclass
class Closes:
    env: WorkflowEnvironment
    at: list[tuple[int, str, datetime]] = field(default_factory=list)

    @activity.defn(name="close_window")
    async def close_window(self, inp: CloseWindowInput) -> CloseWindowResult:
        self.at.append((inp.window_id, inp.reason, await self.env.get_current_time()))
        return CloseWindowResult("started", f"run-{inp.window_id}", 1)


@asynccontextmanager
async def _worker(env: WorkflowEnvironment, closes: Closes) -> AsyncIterator[str]:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[FlowWindowWorkflow],
        activities=[closes.close_window],
        workflow_runner=workflow_runner(*WORKFLOW_MODULES),
    ):
        yield queue


def _debounce(wid: int, new: int = 1, max_wait: float | None = None) -> WindowNote:
    return WindowNote(wid, "debounce", new, period=60.0, max_wait=max_wait)


async def _signal(
    env: WorkflowEnvironment, queue: str, key: str, *notes: WindowNote
) -> WorkflowHandle[FlowWindowWorkflow, int]:
    """Signal-with-start, as the router does."""
    return await env.client.start_workflow(
        FlowWindowWorkflow.run,
        FlowWindowInput(AID, key),
        id=window_workflow_id(AID, key),
        task_queue=queue,
        start_signal="windows",
        start_signal_args=[FlowWindowSignal(list(notes))],
    )


def _after(t0: datetime, at: datetime) -> int:
    """Seconds after ``t0``, to 10 s: the test server's clock also runs while the test
    sends its signals (a second or two here), far less than any difference that matters
    (a repeat pushing the debounce back would add 80 s, a missed event remove 40 s)."""
    return round((at - t0).total_seconds() / 10) * 10


async def test_debounce_closes_a_period_after_its_last_new_event(time_env: WorkflowEnvironment):
    closes = Closes(time_env)
    async with _worker(time_env, closes) as queue:
        t0 = await time_env.get_current_time()
        handle = await _signal(time_env, queue, "quiet", _debounce(1))
        await time_env.sleep(40)
        await _signal(time_env, queue, "quiet", _debounce(1))  # a new event at +40
        await time_env.sleep(40)
        await _signal(time_env, queue, "quiet", _debounce(1, new=0))  # a repeat at +80
        assert await handle.result() == 1
    assert [(w, r, _after(t0, at)) for w, r, at in closes.at] == [(1, "quiet", 100)]


async def test_max_wait_caps_a_steady_stream(time_env: WorkflowEnvironment):
    closes = Closes(time_env)
    async with _worker(time_env, closes) as queue:
        t0 = await time_env.get_current_time()
        for i in range(12):  # a new event every 30 s for 6 minutes: never 60 s quiet
            # the router's windows: max_wait 140 s closes one at 140 and at 290, so the
            # events from 150 on go to window 2, from 300 on to window 3
            window = 1 + (i * 30 >= 150) + (i * 30 >= 300)
            handle = await _signal(time_env, queue, "stream", _debounce(window, max_wait=140))
            await time_env.sleep(30)
        await handle.result()
    got = [(w, r, _after(t0, at)) for w, r, at in closes.at]
    assert got == [(1, "max_wait", 140), (2, "max_wait", 290), (3, "quiet", 390)]


async def test_a_batch_starts_when_full_or_at_its_timeout(time_env: WorkflowEnvironment):
    closes = Closes(time_env)
    async with _worker(time_env, closes) as queue:
        t0 = await time_env.get_current_time()
        batch = WindowNote(7, "batch", 3, timeout=120.0)
        await _signal(time_env, queue, "b", batch)
        await time_env.sleep(20)
        full = WindowNote(8, "batch", 10, closed=True, timeout=120.0)
        handle = await _signal(time_env, queue, "b", WindowNote(7, "batch", 2, timeout=120.0), full)
        assert await handle.result() == 2
    got = [(w, r, _after(t0, at)) for w, r, at in closes.at]
    # a new event does not move a batch's timeout; the full batch goes at once
    assert got == [(8, "full", 20), (7, "timeout", 120)]


async def test_carried_windows_keep_their_deadlines(time_env: WorkflowEnvironment):
    closes = Closes(time_env)
    async with _worker(time_env, closes) as queue:
        t0 = await time_env.get_current_time()
        opened = (t0 - timedelta(seconds=50)).isoformat()
        carried = OpenWindow(_debounce(3), opened, opened)  # what continue-as-new passes on
        handle = await time_env.client.start_workflow(
            FlowWindowWorkflow.run,
            FlowWindowInput(AID, "carried", [carried], continued_runs=1),
            id=window_workflow_id(AID, "carried"),
            task_queue=queue,
        )
        assert await handle.result() == 1
    assert [(w, r, _after(t0, at)) for w, r, at in closes.at] == [(3, "quiet", 10)]
