"""Planning: an activity's task definitions plus one trigger -> the list of tasks to run.

The trigger context (what templates and handlers see) is the event envelope
(``type``, ``source``, ``time``, ``subject``, ``data``, ``extensions``) with these
on top: ``event_id``, ``activity_id``, ``run_id``, ``workflow_id``, ``trigger_kind``,
``scheduled_for``, ``context_window_start``, ``context_window_end`` (ISO strings
or null), the whole envelope again as ``event``, and per task ``task_type`` and
``index``. So ``"{data.message_id}"`` and ``"{event.data.message_id}"`` are the same.

Each planned task's payload is the definition's ``payload`` plus two reserved keys
(they replace same-named keys of the definition): ``trigger`` (the run fields above)
and ``event`` (the envelope, or null for cron runs).

``count: n`` expands a definition into ``n`` tasks; ``index`` is the position in the
expanded list over all definitions, so the plan, and every task id derived from
it, is the same for the same definitions and trigger. Note that ``count`` copies
share a rendered idempotency key unless the template uses ``{index}``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict
from typing import Any

from schemas.approval_io import APPROVAL_TASK_TYPE
from schemas.definitions import TaskDef
from schemas.errors import IngestError
from schemas.workflow_io import PermitRequest, RunActivityInput, TaskSpec
from workers.approvals.config import approval_config
from workers.errors import TaskConfigError
from workers.options import handler_options
from workers.templates import TemplateError, render


class PlanError(IngestError, ValueError):
    """The definitions cannot be planned for this trigger (bad template, bad config)."""


def run_fields(run: RunActivityInput) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "activity_id": run.activity_id,
        "run_id": run.run_id,
        "workflow_id": run.workflow_id,
        "trigger_kind": run.trigger_kind,
        "event_id": run.event_id,
        "scheduled_for": run.scheduled_for,
        "context_window_start": run.context_window_start,
        "context_window_end": run.context_window_end,
    }
    if run.window is not None:  # a debounced or batched run: what its window held
        fields["window"] = asdict(run.window)
    return fields


def trigger_context(run: RunActivityInput) -> dict[str, Any]:
    """The mapping idempotency-key templates are rendered over."""
    event = dict(run.event or {})
    return {**event, **run_fields(run), "event": event}


def plan(
    defs: Sequence[TaskDef], run: RunActivityInput, short: Collection[str] = ()
) -> list[TaskSpec]:
    """Expand ``count``, render keys, build payloads; raises :class:`PlanError`.

    ``short``: the task types whose handler is short; their tasks are planned to
    run it as a local activity (``TaskSpec.local``).
    """
    context = trigger_context(run)
    trigger = run_fields(run)
    specs: list[TaskSpec] = []
    for pos, task in enumerate(defs):
        try:
            handler_options(task.config)
            if task.type == APPROVAL_TASK_TYPE:
                approval_config(task.config)
                if task.permit is not None:  # a person's wait must not hold a scarce slot
                    raise TaskConfigError("an approval task cannot hold a permit")
        except TaskConfigError as exc:
            raise PlanError(f"tasks[{pos}] ({task.type}): {exc}") from None
        for _ in range(task.count):
            index = len(specs)
            key = None
            if task.idempotency_key is not None:
                try:
                    key = render(
                        task.idempotency_key, {**context, "task_type": task.type, "index": index}
                    )
                except TemplateError as exc:
                    raise PlanError(
                        f"tasks[{pos}] ({task.type}) idempotency_key "
                        f"{task.idempotency_key!r}: {exc}"
                    ) from None
            payload = {**task.payload, "trigger": trigger, "event": run.event}
            if run.events is not None:  # a batch: every event of it, in arrival order
                payload["events"] = run.events
            specs.append(
                TaskSpec(
                    task_type=task.type,
                    index=index,
                    payload=payload,
                    config=dict(task.config),
                    idempotency_key=key,
                    on_failure=task.on_failure or "fail",
                    permit=(
                        PermitRequest(task.permit.resource, task.permit.lease_seconds)
                        if task.permit is not None
                        else None
                    ),
                    local=task.type in short,
                )
            )
    return specs
