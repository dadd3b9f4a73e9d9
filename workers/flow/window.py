"""FlowWindowWorkflow: the timers of one (activity, key)'s debounce windows or batches.

The router assigns events to windows in PostgreSQL and signals this workflow with
start (``router/flow/windows.py``); the workflow only keeps time. Per window it
knows when it opened and when it last got a new event (workflow time, at the
signal), and closes it:

* batch: when the router says it is full (``max_size``, closed by count there), or
  ``timeout`` after it opened;
* debounce: ``period`` after its last new event (``quiet``), or ``max_wait`` after it
  opened (``max_wait``), whichever comes first.

Closing is one local activity (``close_window``): under the key's lock it freezes
the members, derives the run from them (``RunActivityInput.for_window``, id from
``schemas.ids``), starts it with REJECT_DUPLICATE and marks the window started. A
crash anywhere in it repeats it with the same members, so the same id.

The workflow ends when it has no window left (the next event signal-with-starts it
again), and continues as new when Temporal suggests it (a hot key), after its
handlers finished, carrying its open windows.

Like the run's workflows, this module holds the class and nothing else, every
import passed through (``workers.sandbox``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from dataclasses import replace

    from temporalio.exceptions import ActivityError, ApplicationError

    from pipeline.retry import UNTIL_DONE
    from schemas.flow.io import (
        FLOW_WINDOW_SIGNAL,
        FLOW_WINDOW_WORKFLOW,
        CloseWindowInput,
        FlowWindowInput,
        FlowWindowSignal,
        OpenWindow,
    )
    from schemas.workflow_io import WINDOW_BATCH
    from workers.flow.window_activities import FlowWindowActivities
    from workers.tracing_waits import FLOW_WINDOW, waited

# Continue as new after this many closed windows even if Temporal does not suggest it
# yet: each window adds a local-activity marker and its signals to the history.
WINDOWS_PER_RUN = 200
CLOSE_TIMEOUT = timedelta(seconds=60)


def deadline(w: OpenWindow) -> tuple[datetime, str]:
    """When ``w`` closes, and why (``full``, ``timeout``, ``quiet`` or ``max_wait``)."""
    opened = datetime.fromisoformat(w.opened_at)
    if w.closed:
        return opened, "full"
    note = w.note
    if note.kind == WINDOW_BATCH:
        return opened + timedelta(seconds=note.timeout or 0), "timeout"
    quiet = datetime.fromisoformat(w.last_event_at) + timedelta(seconds=note.period or 0)
    if note.max_wait is not None and opened + timedelta(seconds=note.max_wait) <= quiet:
        return opened + timedelta(seconds=note.max_wait), "max_wait"
    return quiet, "quiet"


@workflow.defn(name=FLOW_WINDOW_WORKFLOW)
class FlowWindowWorkflow:
    def __init__(self) -> None:
        self._windows: dict[int, OpenWindow] = {}
        self._news = False

    @workflow.signal(name=FLOW_WINDOW_SIGNAL)
    def windows(self, sig: FlowWindowSignal) -> None:
        now = workflow.now().isoformat()
        for note in sig.notes:
            cur = self._windows.get(note.window_id)
            if cur is None:
                self._windows[note.window_id] = OpenWindow(note, now, now, note.closed)
            else:
                self._windows[note.window_id] = replace(
                    cur,
                    note=replace(note, closed=cur.closed or note.closed),
                    last_event_at=now if note.new_events else cur.last_event_at,
                    closed=cur.closed or note.closed,
                )
        self._news = True

    @workflow.query(name="open_windows")
    def open_windows(self) -> list[OpenWindow]:
        return [self._windows[k] for k in sorted(self._windows)]

    @workflow.run
    async def run(self, inp: FlowWindowInput) -> int:
        for w in inp.windows:
            self._windows.setdefault(w.note.window_id, w)
        closed = 0
        while True:
            now = workflow.now()
            for wid in sorted(self._windows):
                at, reason = deadline(self._windows[wid])
                if at <= now:
                    await self._close(inp, wid, reason)
                    closed += 1
            if not self._windows:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._windows:
                    return closed
                continue
            info = workflow.info()
            if info.is_continue_as_new_suggested() or closed >= WINDOWS_PER_RUN:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    FlowWindowInput(
                        inp.activity_id,
                        inp.key,
                        [self._windows[k] for k in sorted(self._windows)],
                        inp.continued_runs + 1,
                    )
                )
            self._news = False
            due = min(deadline(w)[0] for w in self._windows.values())
            wait = max((due - workflow.now()).total_seconds(), 0.001)
            try:
                await workflow.wait_condition(lambda: self._news, timeout=timedelta(seconds=wait))
            except TimeoutError:
                pass

    async def _close(self, inp: FlowWindowInput, window_id: int, reason: str) -> None:
        try:
            await workflow.execute_local_activity_method(
                FlowWindowActivities.close_window,
                CloseWindowInput(inp.activity_id, inp.key, window_id, reason),
                start_to_close_timeout=CLOSE_TIMEOUT,
                # PostgreSQL or Temporal away delays the window's run, never loses it.
                retry_policy=UNTIL_DONE,
            )
        except (ActivityError, ApplicationError) as exc:
            # Only a refusal for good (the run's start rejected): the window stays
            # 'closed' in flow_windows, shown by `ingest flow list`.
            workflow.logger.error("window %d of %s not started: %s", window_id, inp.key, exc)
        w = self._windows.pop(window_id)
        waited(FLOW_WINDOW, since=w.opened_at, window_id=window_id,
               window_kind=w.note.kind, closed_by=reason, flow_key=inp.key,
               activity_id=inp.activity_id)  # fmt: skip
