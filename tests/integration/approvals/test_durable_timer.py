"""Durable timers: a worker SIGKILLed during the wait leaves the SLA timer intact.

The worker is a real ``ingest worker`` subprocess (tests/faults/harness.py). It is
killed a moment into a 15 s SLA and a fresh one is started; the timer lives on the
Temporal server, so the escalation still happens at the deadline. Tolerance: the
escalation's workflow time may trail the deadline by at most ``TOLERANCE`` seconds
(the timer fires on the server; the new worker must pick up the workflow task).
The SLA is 15 s so the dead worker's sticky queue has been idle longer than the
server's 10 s sticky-poller window when the timer fires: the task goes straight
to the new worker instead of waiting out a sticky schedule-to-start timeout.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.faults import harness as h
from tests.support import wait

from .conftest import approval_task, at, decide, start_approval_run, state, wait_state

SLA = 15.0
TOLERANCE = 3.0


@pytest.mark.timeout(180)
async def test_sigkilled_worker_leaves_the_sla_timer_intact(
    stack, private_temporal, cfg, topics, task_queue, temporal, db_pool, tmp_path
):
    config = approval_task(sla_seconds=SLA, escalate_to="carol", escalation_sla_seconds=120)
    ep = h.Endpoints(stack.kafka, private_temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    try:
        worker = await pipe.spawn("worker")
        run, task, _ = await start_approval_run(temporal, db_pool, task_queue, config)
        s = await wait_state(task, lambda s: s.status == "waiting")
        assert s.deadline is not None
        deadline = at(s.deadline)
        await worker.kill()  # SIGKILL: no drain, the workflow stays cached on a dead worker
        await asyncio.sleep(1)
        worker = await pipe.restart(worker)

        async def escalated(child: h.Child = worker) -> bool:
            child.assert_alive()
            return bool(
                await db_pool.fetchval(
                    "SELECT count(*) FROM approval_events WHERE task_id = $1"
                    " AND kind = 'escalated'",
                    task.id,
                )
            )

        await wait.eventually(escalated, SLA + 60, "the escalation after the restart")
        when = await db_pool.fetchval(
            "SELECT at FROM approval_events WHERE task_id = $1 AND kind = 'escalated'", task.id
        )
        late = (when - deadline).total_seconds()
        print(f"escalation {late:.3f} s after the SLA deadline (tolerance {TOLERANCE} s)")
        assert 0 <= late <= TOLERANCE, f"escalated {late:.3f} s after the deadline"
        after = await state(task)
        assert (after.status, after.escalations, after.audit[1].kind) == (
            "escalated",
            1,
            "escalated",
        )
        assert after.deadline is not None
        # 120 s after the SLA deadline. Not to the millisecond: when the kill lands inside
        # the workflow task that set the first deadline, the new worker runs that task
        # again and the deadline it keeps may differ by milliseconds from the one read
        # before the kill (seen once on the real server: 119.977 s).
        assert abs((at(after.deadline) - deadline).total_seconds() - 120) < 1
        # The escalation contact may decide now; the run goes on.
        await decide(task, "carol", "approve")
        outcome = await asyncio.wait_for(run.result(), 60)
        assert outcome.status == "succeeded"
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
