"""Approval tasks without Temporal: the config model, who may decide, stages, metrics."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError

from schemas.approval_io import (
    CHANGES_REQUESTED,
    ESCALATED,
    WAITING,
    ApprovalDecision,
    ApprovalResubmission,
    AuditEntry,
)
from schemas.definitions import TaskDef
from schemas.workflow_io import RunActivityInput, TaskInstanceResult, TaskSpec
from tests.support.metrics import metric_value
from workers.approvals import rules
from workers.approvals.activities import count
from workers.approvals.config import approval_config
from workers.approvals.stages import run_in_stages, stages
from workers.planning import PlanError, plan


def test_config_defaults_and_single_names():
    cfg = approval_config({"approvers": "alice", "sla_seconds": 60, "escalate_to": "carol"})
    assert (cfg.approvers, cfg.escalate_to) == (["alice"], ["carol"])
    assert (cfg.remind_every_seconds, cfg.escalation_seconds) == (None, 60)
    assert cfg.resubmission_timeout_seconds == 7 * 24 * 3600


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"sla_seconds": 5}, "approval config.approvers: Field required"),
        ({"approvers": [], "sla_seconds": 5}, "approval config.approvers: List should have"),
        ({"approvers": ["a"], "sla_seconds": 0}, "approval config.sla_seconds: Input should be"),
        ({"approvers": ["a"], "sla_seconds": 5, "sla_second": 1}, "config.sla_second: Extra"),
        ({"approvers": [""], "sla_seconds": 5}, "approval config.approvers.0: String should"),
    ],
)
def test_config_errors_name_the_field(config, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        approval_config(config)


def test_a_bad_approval_config_fails_the_plan_naming_the_task():
    run = RunActivityInput("a1", "activity-a1:e1", "r1", "event", "e1", {"type": "t"})
    bad = TaskDef(type="approval", config={"approvers": ["a"]})
    with pytest.raises(PlanError, match=r"tasks\[0\] \(approval\): approval config.sla_seconds"):
        plan([bad], run)


def _refusal(fn, *args) -> ApplicationError:
    with pytest.raises(ApplicationError) as err:
        fn(*args)
    return err.value


def test_who_may_decide_and_when():
    ok = ApprovalDecision("alice", "approve")
    rules.check_decision("t", WAITING, ["alice"], ["carol"], ok)
    carol = ApprovalDecision("carol", "reject", "no")
    assert _refusal(rules.check_decision, "t", WAITING, ["alice"], ["carol"], carol).type == (
        rules.NOT_ALLOWED
    )
    rules.check_decision("t", ESCALATED, ["alice"], ["carol"], carol)  # after the SLA
    rules.check_decision("t", ESCALATED, ["alice"], ["carol"], ok)  # approvers still may
    for status in ("pending", CHANGES_REQUESTED, "approved", "auto_rejected"):
        err = _refusal(rules.check_decision, "t", status, ["alice"], [], ok)
        assert err.type == rules.NOT_OPEN and err.non_retryable
    no_reason = ApprovalDecision("alice", "request_changes", "  ")
    assert _refusal(rules.check_decision, "t", WAITING, ["alice"], [], no_reason).type == (
        rules.INVALID
    )


def test_resubmission_keeps_the_reserved_payload_keys():
    r = ApprovalResubmission("bob", {"amount": 2, "trigger": "forged"})
    assert _refusal(rules.check_resubmission, "t", WAITING, r).type == rules.NOT_OPEN
    rules.check_resubmission("t", CHANGES_REQUESTED, r)
    current = {"amount": 1, "trigger": {"run_id": "r"}, "event": None}
    assert rules.resubmitted_payload(current, r.payload) == {
        "amount": 2, "trigger": {"run_id": "r"}, "event": None,
    }  # fmt: skip


def _spec(task_type: str, index: int) -> TaskSpec:
    return TaskSpec(task_type, index)


def test_stages_cut_at_approvals():
    specs = [_spec(t, i) for i, t in enumerate(["noop", "emit", "approval", "emit", "approval"])]
    assert [[s.index for s in st] for st in stages(specs)] == [[0, 1], [2], [3], [4]]
    assert [[s.index for s in st] for st in stages(specs[:2])] == [[0, 1]]


def test_a_rejected_approval_skips_the_tasks_after_it():
    specs = [_spec(t, i) for i, t in enumerate(["noop", "approval", "emit", "emit"])]
    started: list[int] = []

    async def run_task(spec: TaskSpec) -> TaskInstanceResult:
        started.append(spec.index)
        status = "failed" if spec.task_type == "approval" else "succeeded"
        return TaskInstanceResult(f"task-r:{spec.task_type}:{spec.index}", status)

    results = asyncio.run(run_in_stages("r", specs, run_task))
    assert started == [0, 1]
    assert [r.status for r in results] == ["succeeded", "failed", "skipped", "skipped"]
    assert results[2].task_id == "task-r:emit:2"
    assert results[3].error == "not run: approval task-r:approval:1 was not given (failed)"


def test_metrics_count_each_outcome():
    before = (
        metric_value(
            "pipeline_approval_decisions_total", missing_ok=True, outcome="request_changes"
        ),
        metric_value(
            "pipeline_approval_decisions_total", missing_ok=True, outcome="resubmission_timeout"
        ),
        metric_value("pipeline_sla_escalations_total", missing_ok=True),
        metric_value("pipeline_approval_wait_seconds_count", missing_ok=True),
    )
    count(AuditEntry(1, "t", "decision", 1, "a", "request_changes", "why", 3.0))
    count(AuditEntry(2, "t", "expired", 1, reason="late", waited_seconds=9.0))
    count(AuditEntry(3, "t", "escalated", 2))
    count(AuditEntry(4, "t", "reminder", 2))
    after = (
        metric_value("pipeline_approval_decisions_total", outcome="request_changes"),
        metric_value("pipeline_approval_decisions_total", outcome="resubmission_timeout"),
        metric_value("pipeline_sla_escalations_total"),
        metric_value("pipeline_approval_wait_seconds_count"),
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1]
