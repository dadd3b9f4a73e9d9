"""An activity definition -> the Temporal Schedule that fires its dispatcher.

The schedule's action carries a fingerprint of everything we derive it from
(trigger + task queue) in the dispatcher workflow's memo. Why: the server
rewrites cron strings into structured calendars, so comparing a described
schedule to a desired one field by field reports changes that are not there.
``sync`` compares fingerprints instead, which makes it idempotent.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from schemas.definitions import ActivityDef, CronTrigger
from schemas.ids import dispatcher_id
from schemas.schedule_io import CronFireInput

DISPATCHER_WORKFLOW = "CronFireWorkflow"
FINGERPRINT_MEMO = "ingest_fingerprint"
TASK_QUEUE_MEMO = "ingest_task_queue"
DISABLED_NOTE = "paused by ingest: activity disabled"
OPERATOR_NOTE = "paused by ingest schedules pause"
PAUSED_NOTE = "paused by ingest: activity paused"  # ingest activities pause

# How late Temporal may still take a missed action by itself (e.g. after a short
# server outage): such a fire runs its own nominal time and is not a misfire.
# Beyond it the time is dropped and the dispatcher's misfire policy takes over.
# Small on purpose: Temporal's own catch-up knows nothing of catchup_limit.
CATCHUP_WINDOW = timedelta(minutes=1)

# The dispatcher is tiny; overlap only matters while workers are down (the
# dispatcher stays queued). skip/compress: later fires are skipped and become
# a gap the next fire handles; catchup: every fire is kept and runs late.
OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "catchup": ScheduleOverlapPolicy.ALLOW_ALL,
    "compress": ScheduleOverlapPolicy.SKIP,
}


def fingerprint(trigger: CronTrigger, task_queue: str) -> str:
    doc = {"trigger": trigger.model_dump(mode="json"), "task_queue": task_queue, "v": 1}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def build_spec(trigger: CronTrigger) -> ScheduleSpec:
    jitter = timedelta(seconds=trigger.jitter_seconds) if trigger.jitter_seconds else None
    if trigger.interval_seconds:
        return ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=timedelta(seconds=trigger.interval_seconds))],
            jitter=jitter,
        )
    return ScheduleSpec(
        cron_expressions=[trigger.cron], time_zone_name=trigger.timezone, jitter=jitter
    )


def build_schedule(
    activity: ActivityDef, task_queue: str, *, paused: bool, note: str = DISABLED_NOTE
) -> Schedule:
    trigger = activity.trigger
    if not isinstance(trigger, CronTrigger):
        raise ValueError(f"activity {activity.id} is not cron-triggered")
    return Schedule(
        action=ScheduleActionStartWorkflow(
            DISPATCHER_WORKFLOW,
            CronFireInput(activity_id=str(activity.id)),
            id=dispatcher_id(activity.id),
            task_queue=task_queue,
            memo={FINGERPRINT_MEMO: fingerprint(trigger, task_queue)},
        ),
        spec=build_spec(trigger),
        policy=SchedulePolicy(
            overlap=OVERLAP[trigger.misfire_policy], catchup_window=CATCHUP_WINDOW
        ),
        state=ScheduleState(paused=paused, note=note if paused else None),
    )
