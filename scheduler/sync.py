"""Make Temporal Schedules match the cron activities; pause and resume one.

``reconcile`` creates a schedule for each new cron activity, updates it when its
fingerprint (trigger + task queue, see :mod:`scheduler.spec`) changed, pauses it
when the activity is disabled (and unpauses it when re-enabled), and deletes
schedules whose activity is gone. It is idempotent: a second run reports nothing.

Ownership: a sync only deletes schedules whose memo names its own task queue,
so several deployments (or test runs) can share a namespace. A schedule an
operator paused with ``ingest schedules pause`` stays paused through syncs; a
sync only unpauses the schedules it paused itself (told apart by the note).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from definitions import store as activity_store
from pipeline.codec import needs_reencrypting
from scheduler import store, timing
from scheduler.spec import (
    DISABLED_NOTE,
    FINGERPRINT_MEMO,
    OPERATOR_NOTE,
    PAUSED_NOTE,
    TASK_QUEUE_MEMO,
    build_schedule,
    fingerprint,
)
from schemas.definitions import ActivityDef, CronTrigger
from schemas.ids import SCHEDULE_PREFIX, dispatcher_workflow_id, schedule_id
from schemas.schedule_io import CronFireInput

RESUMED_NOTE = "resumed by ingest"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    action: str  # created | updated | paused | resumed | deleted | kept-paused
    schedule_id: str
    detail: str = ""

    def __str__(self) -> str:
        detail = f"  ({self.detail})" if self.detail else ""
        return f"{self.action:<11} {self.schedule_id}{detail}"


async def _describe(handle: ScheduleHandle) -> ScheduleDescription | None:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def current_fingerprint(desc: ScheduleDescription, converter: DataConverter) -> str | None:
    """The fingerprint in the schedule's action memo, decoded as ``converter`` (the
    client's: its payload codec included) decodes; None when there is none, or when the
    schedule must be rewritten anyway: written in plaintext while the codec is on, under
    another key than the encrypting one, or not decodable by this converter (a retired
    key, the codec turned off). The update writes the action's input and memo again."""
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or not action.memo:
        return None
    # A described action holds its memo as raw payloads (encrypted with the codec on).
    payload: Any = action.memo.get(FINGERPRINT_MEMO)
    if payload is None:
        return None
    if isinstance(payload, Payload):
        if needs_reencrypting(payload, converter.payload_codec):
            return None  # plaintext, or under a key being rotated out: the update rewrites it
        try:
            payload = (await converter.decode([payload]))[0]
        except Exception as exc:  # CodecError, or an encoding this converter lacks
            log.warning("schedule %s: its memo does not decode (%s): rewriting it", desc.id, exc)
            return None
    return str(payload)


async def ensure(
    client: Client, act: ActivityDef, task_queue: str, *, paused: bool = False
) -> list[Change]:
    """Bring one activity's schedule in line; the changes made (empty when none).

    ``paused``: the activity is paused (``ingest activities pause``): its schedule is
    paused with :data:`PAUSED_NOTE`, so the times missed meanwhile go to the misfire
    policy at the first fire after the resume, as for any paused schedule."""
    assert isinstance(act.trigger, CronTrigger)
    sid = schedule_id(act.id)
    handle = client.get_schedule_handle(sid)
    want_paused = not act.enabled or paused
    note = DISABLED_NOTE if not act.enabled else PAUSED_NOTE
    why = "activity disabled" if not act.enabled else "activity paused"
    desc = await _describe(handle)
    if desc is None:
        try:
            await client.create_schedule(
                sid,
                build_schedule(act, task_queue, paused=want_paused, note=note),
                memo={TASK_QUEUE_MEMO: task_queue},
            )
            return [Change("created", sid, f"paused: {why}" if want_paused else "")]
        except ScheduleAlreadyRunningError:  # created concurrently: reconcile it instead
            desc = await handle.describe()
    changes: list[Change] = []
    if await current_fingerprint(desc, client.data_converter) != fingerprint(
        act.trigger, task_queue
    ):
        state = desc.schedule.state

        def updater(_: ScheduleUpdateInput) -> ScheduleUpdate:
            new = build_schedule(act, task_queue, paused=state.paused)
            new.state = state  # keep paused/note: pausing is decided below
            return ScheduleUpdate(schedule=new)

        await handle.update(updater)
        changes.append(Change("updated", sid, _trigger_summary(act.trigger)))
    state = desc.schedule.state
    ours = state.paused and state.note in (DISABLED_NOTE, PAUSED_NOTE)
    if want_paused and (not state.paused or (ours and state.note != note)):
        await handle.pause(note=note)
        changes.append(Change("paused", sid, why))
    elif not want_paused and ours:
        await handle.unpause(note=RESUMED_NOTE)
        was = "activity enabled" if state.note == DISABLED_NOTE else "activity resumed"
        changes.append(Change("resumed", sid, was))
    return changes


async def ensure_one(
    client: Client, pool: asyncpg.Pool, activity_id: str, task_queue: str
) -> list[Change]:
    """:func:`ensure` for one activity as the database has it now (its pause included);
    nothing for an activity that is not cron (or is gone)."""
    act = await activity_store.get(pool, activity_id)
    if act is None or not isinstance(act.trigger, CronTrigger):
        return []
    paused = activity_id in await activity_store.paused_ids(pool)
    return await ensure(client, act, task_queue, paused=paused)


async def reconcile(client: Client, pool: asyncpg.Pool, task_queue: str) -> list[Change]:
    """Every change needed so that schedules match the cron activities in ``pool``."""
    activities = await activity_store.cron_activities(pool)
    paused = await activity_store.paused_ids(pool)
    wanted = {schedule_id(a.id) for a in activities}
    changes: list[Change] = []
    for act in activities:
        changes += await ensure(client, act, task_queue, paused=str(act.id) in paused)
    async for listed in await client.list_schedules():
        if not listed.id.startswith(SCHEDULE_PREFIX) or listed.id in wanted:
            continue
        if (await listed.memo()).get(TASK_QUEUE_MEMO) != task_queue:
            continue  # another deployment's schedule
        try:
            await client.get_schedule_handle(listed.id).delete()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:  # listing lags deletes
                continue
            raise
        changes.append(Change("deleted", listed.id, "activity gone"))
    return changes


async def pause(client: Client, activity_id: str, note: str = OPERATOR_NOTE) -> None:
    await client.get_schedule_handle(schedule_id(activity_id)).pause(note=note)


async def resume(
    client: Client,
    pool: asyncpg.Pool,
    activity_id: str,
    *,
    now: bool = False,
    task_queue: str | None = None,
    wait: float = 30,
) -> str:
    """Unpause; returns what the misfire policy does with the times missed meanwhile.

    By default the policy is applied by the dispatcher at the first regular fire
    after the resume (see :mod:`scheduler.misfire`). With ``now`` it is applied at
    once: a dispatcher is started for the newest missed time, with the id that
    time's own fire would have had (so a fire is never doubled), on ``task_queue``;
    its result is awaited up to ``wait`` seconds (a worker must be polling).
    """
    await client.get_schedule_handle(schedule_id(activity_id)).unpause(note=RESUMED_NOTE)
    act = await activity_store.get(pool, activity_id)
    if act is None or not isinstance(act.trigger, CronTrigger):
        return "resumed (activity not in the database: run `ingest schedules sync`)"
    at = datetime.now(UTC)
    last = await store.last_cron_run(pool, activity_id, at)
    if last is None:
        return "resumed"
    trigger = act.trigger
    latest = timing.floor(trigger, at)
    _, total = timing.between(trigger, last, timing.following(trigger, at))
    if not total:
        return "resumed; no nominal time was missed"
    head = f"resumed; {total} nominal time(s) missed since {last.isoformat()}: "
    head += f"policy {trigger.misfire_policy}, "
    warn = "" if act.enabled else " (warning: the activity is disabled; sync will pause it)"
    if now:
        if task_queue is None:
            raise ValueError("resume(now=True) needs the workers' task_queue")
        return head + await _apply_now(client, activity_id, latest, at, task_queue, wait) + warn
    nxt = timing.following(trigger, at).isoformat()
    what = {
        "skip": "they are skipped",
        "catchup": f"the latest {min(total, trigger.catchup_limit)} are replayed",
        "compress": "one run covers them all",
    }[trigger.misfire_policy]
    return head + f"at the next fire ({nxt}) {what}{warn}"


async def _apply_now(
    client: Client,
    activity_id: str,
    latest: datetime,
    at: datetime,
    task_queue: str,
    wait: float,
) -> str:
    """Start the dispatcher of ``latest`` with ``resumed_at``; describe what it did."""
    from scheduler.dispatcher import CronFireWorkflow

    wid = dispatcher_workflow_id(activity_id, latest)
    try:
        handle = await client.start_workflow(
            CronFireWorkflow.run,
            CronFireInput(activity_id, resumed_at=at.isoformat()),
            id=wid,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        return f"{latest.isoformat()} was already fired ({wid}): the next fire applies the policy"
    try:
        result = await asyncio.wait_for(handle.result(), wait)
    except TimeoutError:
        return f"applied now by {wid}, still queued after {wait:.0f}s (is a worker running?)"
    if result.outcome == "skipped":
        return f"applied now: {result.misfires} dropped, nothing run"
    if result.outcome == "nothing_missed":
        return "applied now: nothing left to run"
    replayed = f", replayed {', '.join(result.replayed)}" if result.replayed else ""
    return (
        f"applied now: {result.outcome} {result.workflow_id} (window "
        f"{result.context_window_start} .. {result.context_window_end}){replayed}"
    )


def _trigger_summary(t: CronTrigger) -> str:
    when = f"every {t.interval_seconds}s" if t.interval_seconds else f"{t.cron} {t.timezone}"
    return f"{when}, misfire {t.misfire_policy}"
