"""The schedule action: ``CronFireWorkflow`` and its one activity.

Why a dispatcher and not the run itself: Temporal names schedule-started
workflows ``{id}-{RFC3339}`` and starts backfills with ALLOW_DUPLICATE, so the
same nominal time could run twice. The dispatcher reads the nominal time from
the ``TemporalScheduledStartTime`` search attribute (never the wall clock) and
starts ``RunActivityWorkflow`` with the contract id
``activity-{activity_id}:{scheduled_for}`` and REJECT_DUPLICATE. A second fire
of the same time (backfill, manual trigger, retry) ends as a counted duplicate:
``layer="ledger"`` when ``activity_runs`` already has the run (this survives
Temporal's retention period), ``layer="temporal"`` when Temporal rejects the
start (a run started but not logged yet).

Misfires are handled here because this is the one place that sees every gap,
whatever made it (pause, server outage, skipped overlaps), and its metrics are
scraped (a CLI process's are not). Only a *regular* fire looks for the gap
before it: one Temporal started before the next nominal time came (plus
jitter), i.e. the schedule taking its action on time, even if workers are
down and the dispatcher runs later. Backfills (catch-up replays, operators)
start after that point, so they just run their own nominal time: replays never
start more replays, and backfilling an old time never reopens old gaps.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy
    from temporalio.common import SearchAttributeKey
    from temporalio.exceptions import ApplicationError
    from temporalio.service import RPCError, RPCStatusCode

    from definitions import store as activity_store
    from pipeline import metrics
    from pipeline.retry import UNTIL_DONE
    from pipeline.starter import DUPLICATE, STARTED, Starter
    from scheduler import misfire, store, timing
    from scheduler.metrics import MISFIRES
    from schemas.definitions import CronTrigger
    from schemas.ids import cron_workflow_id, dispatcher_workflow_id, schedule_id
    from schemas.schedule_io import CronFireInput, FireInput, FireResult
    from schemas.workflow_io import TRIGGER_CRON, RunActivityInput

log = logging.getLogger(__name__)

SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
# How many of the newest gap candidates are checked against Temporal: a run may
# be started (or its dispatcher queued) but not logged in activity_runs yet.
VERIFY_TAIL = 20


@workflow.defn(name="CronFireWorkflow")
class CronFireWorkflow:
    @workflow.run
    async def run(self, inp: CronFireInput) -> FireResult:
        started = workflow.info().start_time.isoformat()
        fired = workflow.info().typed_search_attributes.get(SCHEDULED_START)
        if inp.resumed_at is not None:  # `ingest schedules resume --now`
            fire = FireInput(inp.activity_id, inp.resumed_at, started, resume=True)
        elif fired is None:
            raise ApplicationError(
                "CronFireWorkflow must be started by a Temporal Schedule "
                "(no TemporalScheduledStartTime search attribute)",
                type="NotScheduled",
                non_retryable=True,
            )
        else:
            fire = FireInput(inp.activity_id, fired.isoformat(), started)
        # A local activity: one workflow task instead of three round trips, so
        # the dispatcher finishes well inside a schedule interval.
        return await workflow.execute_local_activity_method(
            CronActivities.fire,
            fire,
            start_to_close_timeout=timedelta(seconds=30),
            # Temporal or PostgreSQL down delays the fire, never loses it.
            retry_policy=UNTIL_DONE,
        )


class CronActivities:
    def __init__(self, client: Client, pool: Any, task_queue: str) -> None:
        self._client = client
        self._pool = pool
        # Outages are not retried here: the fire is an activity Temporal retries.
        self._starter = Starter(client, task_queue, component="scheduler", retry_outages=False)

    def all(self) -> list[Any]:
        return [self.fire]

    @activity.defn(name="cron_fire")
    async def fire(self, inp: FireInput) -> FireResult:
        """Start the run of one nominal time, applying the misfire policy to a gap before it."""
        act = await activity_store.get(self._pool, inp.activity_id)
        if act is None or not isinstance(act.trigger, CronTrigger):
            log.warning(
                "schedule fired for unknown activity %s: run `ingest schedules sync`",
                inp.activity_id,
            )
            return FireResult("unknown_activity")
        if not act.enabled:
            return FireResult("disabled")
        trigger = act.trigger
        # A manual trigger fires at "now": snap to the latest nominal time, so a
        # trigger re-fires a real nominal time and never invents a new one.
        nominal = timing.floor(trigger, datetime.fromisoformat(inp.fired_at))
        decision = misfire.Decision(timing.previous(trigger, nominal), nominal)
        started = datetime.fromisoformat(inp.started_at)
        jitter = timedelta(seconds=trigger.jitter_seconds)
        if inp.resume:
            decision = await self._decide_at_resume(inp.activity_id, trigger, nominal)
        elif started < timing.following(trigger, nominal) + jitter:  # a regular fire
            decision = await self._decide(inp.activity_id, trigger, nominal)
        if decision.replay:
            await self._backfill(inp.activity_id, decision.replay)
        if not decision.run:  # resumed: skip dropped the gap, or nothing was missed
            if decision.misfires:
                MISFIRES.labels(policy=trigger.misfire_policy).inc(decision.misfires)
                log.warning(
                    "activity %s resumed: %d nominal time(s) missed up to %s dropped (skip)",
                    inp.activity_id,
                    decision.misfires,
                    nominal.isoformat(),
                )
            return FireResult(
                "skipped" if decision.misfires else "nothing_missed",
                None,
                nominal.isoformat(),
                misfires=decision.misfires,
            )
        outcome, wid, run = await self._start(inp.activity_id, decision)
        if outcome == STARTED and decision.misfires:
            # Counted by the fire that actually ran: a duplicate re-fire sees the
            # same gap and must not count it again.
            MISFIRES.labels(policy=trigger.misfire_policy).inc(decision.misfires)
            log.warning(
                "activity %s: %d nominal time(s) missed before %s (policy %s): replayed %s, "
                "dropped %d",
                inp.activity_id,
                decision.misfires,
                nominal.isoformat(),
                trigger.misfire_policy,
                [t.isoformat() for t in decision.replay],
                decision.misfires - len(decision.replay),
            )
        return FireResult(
            outcome,
            wid,
            nominal.isoformat(),
            run.context_window_start,
            run.context_window_end,
            [t.isoformat() for t in decision.replay],
            decision.misfires if outcome == STARTED else 0,
        )

    async def _gap(
        self, activity_id: str, trigger: CronTrigger, nominal: datetime
    ) -> misfire.Gap | None:
        """The times missed before ``nominal`` and the last that ran, or None before the
        first run ever (nothing can have been missed)."""
        last = await store.last_cron_run(self._pool, activity_id, nominal)
        if last is None:
            return None
        missed, total = timing.between(trigger, last, nominal, limit=1000)
        for i in range(len(missed) - 1, max(len(missed) - VERIFY_TAIL, 0) - 1, -1):
            if await self._covered(activity_id, missed[i]):
                last, missed, total = missed[i], missed[i + 1 :], len(missed) - i - 1
                break
        return misfire.Gap(timing.previous(trigger, nominal), last, missed, total)

    async def _decide(
        self, activity_id: str, trigger: CronTrigger, nominal: datetime
    ) -> misfire.Decision:
        gap = await self._gap(activity_id, trigger, nominal)
        if gap is None:
            return misfire.Decision(timing.previous(trigger, nominal), nominal)
        return misfire.decide(trigger.misfire_policy, nominal, gap, trigger.catchup_limit)

    async def _decide_at_resume(
        self, activity_id: str, trigger: CronTrigger, nominal: datetime
    ) -> misfire.Decision:
        """``nominal`` is the newest time at or before the resume; this dispatcher has
        its fire's id, so it counts as that fire: only its run can show it ran."""
        gap = await self._gap(activity_id, trigger, nominal)
        wid = cron_workflow_id(activity_id, nominal)
        if gap is None or await store.run_logged(self._pool, wid) or await self._exists(wid):
            return misfire.Decision(timing.previous(trigger, nominal), nominal, run=False)
        return misfire.decide_at_resume(trigger.misfire_policy, nominal, gap, trigger.catchup_limit)

    async def _exists(self, wid: str) -> bool:
        try:
            await self._client.get_workflow_handle(wid).describe()
            return True
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        return False

    async def _covered(self, activity_id: str, nominal: datetime) -> bool:
        """The time ran, or its dispatcher exists (queued or in flight): not missed."""
        for wid in (
            cron_workflow_id(activity_id, nominal),
            dispatcher_workflow_id(activity_id, nominal),
        ):
            if await self._exists(wid):
                return True
        return False

    async def _backfill(self, activity_id: str, times: list[datetime]) -> None:
        """Replay nominal times through the schedule; each lands in a dispatcher again."""
        half = timedelta(milliseconds=500)  # a range holding exactly that time
        await self._client.get_schedule_handle(schedule_id(activity_id)).backfill(
            *(ScheduleBackfill(t - half, t + half, ScheduleOverlapPolicy.ALLOW_ALL) for t in times)
        )

    async def _start(
        self, activity_id: str, decision: misfire.Decision
    ) -> tuple[str, str, RunActivityInput]:
        run = RunActivityInput.for_cron(activity_id, decision.window_start, decision.window_end)
        wid = run.workflow_id
        if await store.run_logged(self._pool, wid):
            # Temporal forgets closed ids after the namespace retention (24 h on
            # the dev server); activity_runs does not, so an old backfill stays a no-op.
            metrics.DUPLICATES_SUPPRESSED.labels(
                component="scheduler", trigger=TRIGGER_CRON, layer=metrics.LAYER_LEDGER
            ).inc()
            log.info("cron run %s already logged: not starting it again", wid)
            return DUPLICATE, wid, run
        outcome = await self._starter.start(run)
        if outcome == DUPLICATE:
            log.info("cron run %s already started: not starting it again", wid)
        return outcome, wid, run
