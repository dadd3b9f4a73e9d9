"""The pure parts of holding an activity (workers/hold.py): a plan that is not held
passes through untouched, and plans recorded before the pause existed decode as not held."""

from __future__ import annotations

import asyncio

from temporalio.converter import DataConverter

from schemas.workflow_io import PlanTasksResult, TaskSpec
from tests.support.runs import event_run
from workers.hold import RECHECK_FIRST_SECONDS, RECHECK_MAX_SECONDS, wait_while_held


def test_a_plan_that_is_not_held_passes_through_without_any_workflow_call():
    # Outside a workflow every workflow.* call raises: this one makes none, and awaits
    # nothing (so it adds no command, timer or step to the run's history).
    plan = PlanTasksResult(tasks=[TaskSpec(task_type="noop", index=0)])
    run = event_run("00000000-0000-0000-0000-000000000001")
    assert asyncio.run(wait_while_held(run, plan)) is plan


def test_a_plan_recorded_before_the_pause_existed_is_not_held():
    conv = DataConverter.default.payload_converter
    old = conv.to_payloads([{"tasks": [], "flow_slot": None, "flow_grant": None}])
    (plan,) = conv.from_payloads(old, [PlanTasksResult])
    assert plan.held is False


def test_the_recheck_backoff_is_bounded():
    # A lost resume signal is found within the cap; the rounds of a long pause stay few.
    delays, d = [], RECHECK_FIRST_SECONDS
    while d < RECHECK_MAX_SECONDS:
        delays.append(d)
        d = min(d * 2, RECHECK_MAX_SECONDS)
    day = 86_400
    rounds = len(delays) + (day - sum(delays)) / RECHECK_MAX_SECONDS
    assert rounds < 110, rounds
