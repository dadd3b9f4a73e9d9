"""Activity definitions: what ``activities`` rows and ``ingest activities apply`` files hold.

Validation errors name the bad field (pydantic's ``loc``), e.g.
``activities[1].trigger.misfire_policy: Input should be 'skip', 'catchup' or 'compress'``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.flow.spec import FlowDef


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventTrigger(_Strict):
    type: Literal["event"]
    event_type: str = Field(min_length=1)


class CronTrigger(_Strict):
    type: Literal["cron"]
    cron: str = Field(min_length=1, description="5-field cron spec, e.g. '0 * * * *'")
    timezone: str = "UTC"
    misfire_policy: Literal["skip", "catchup", "compress"] = "skip"
    catchup_limit: int = Field(10, ge=1, le=1000)
    jitter_seconds: int = Field(0, ge=0)
    # Sub-minute schedules for tests and demos: when set, the schedule fires every
    # N seconds (epoch-aligned) instead of on ``cron``, which stays required.
    interval_seconds: int | None = Field(None, ge=1)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {v!r}") from None
        return v

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, v: str) -> str:
        if len(v.split()) != 5:
            raise ValueError("cron must have 5 fields: minute hour day-of-month month day-of-week")
        return v


Trigger = Annotated[EventTrigger | CronTrigger, Field(discriminator="type")]

# What a task does when its handler fails for good: ``fail`` (the run fails) or
# ``pause`` (the task waits as pending_fix for an operator's fix, skip or abort).
OnFailure = Literal["pause", "fail"]


_RESOURCE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"  # no ':' (it separates the permit id's parts)


class ResourceDef(_Strict):
    """A scarce resource (``resources:`` in an activities file): N permits, slots 0..N-1."""

    name: str = Field(min_length=1, max_length=100, pattern=_RESOURCE_NAME)
    capacity: int = Field(ge=1, le=1000)
    lease_seconds: int = Field(600, ge=1, le=7 * 24 * 3600)
    # Sleep between full rounds of busy slots: doubles from backoff up to max_backoff.
    backoff_seconds: float = Field(5.0, gt=0, le=3600)
    max_backoff_seconds: float = Field(60.0, gt=0, le=3600)


class PermitDef(_Strict):
    """A task's ``permit:``: hold one permit of ``resource`` while the handler runs."""

    resource: str = Field(min_length=1, max_length=100, pattern=_RESOURCE_NAME)
    lease_seconds: int | None = Field(None, ge=1, le=7 * 24 * 3600)


class TaskDef(_Strict):
    type: str = Field(min_length=1, description="a registered task handler, e.g. 'emit'")
    payload: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    # A template over the trigger context, e.g. "{data.message_id}". Two tasks
    # rendering the same key run once: the consumer-side content dedupe.
    idempotency_key: str | None = None
    count: int = Field(1, ge=1, le=1000, description="how many instances to plan")
    # None: the activity's ``on_failure`` (filled in when an ActivityDef is validated).
    on_failure: OnFailure | None = None
    permit: PermitDef | None = None


class ActivityDef(_Strict):
    id: uuid.UUID
    name: str = Field(min_length=1)
    enabled: bool = True
    trigger: Trigger
    # Legacy compatibility metadata: persisted and returned, never read at run time.
    dedupe_key_strategy: str | None = None
    # The default ``on_failure`` of this activity's tasks. It is resolved into each
    # task that sets none when the definition is validated, so the stored tasks
    # (what plan_tasks reads) always carry their own policy.
    on_failure: OnFailure = "fail"
    tasks: list[TaskDef] = Field(default_factory=list)
    # How runs are paced (schemas/flow/spec.py, docs/flow-control.md); None: no pacing.
    flow: FlowDef | None = None

    @model_validator(mode="after")
    def _flow_fits_trigger(self) -> ActivityDef:
        if self.flow is None or self.trigger.type == "event":
            return self
        # A cron fire has no event: nothing to read a key from, and one fire per
        # nominal time leaves nothing to debounce, batch or skip by rate.
        per_event = [
            c
            for c in ("debounce", "batch", "rate_limit", "ordered", "cancel_on")
            if getattr(self.flow, c)
        ]
        if per_event:
            raise ValueError(f"flow.{per_event[0]} needs an event trigger")
        if self.flow.keys():
            raise ValueError(f"flow.{next(iter(self.flow.keys()))}.key needs an event trigger")
        return self

    @model_validator(mode="before")
    @classmethod
    def _task_default_on_failure(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
            return data
        default = data.get("on_failure", "fail")
        return {**data, "tasks": [_with_default(t, default) for t in data["tasks"]]}


def _with_default(task: Any, on_failure: Any) -> Any:
    if isinstance(task, dict) and task.get("on_failure") is None:
        return {**task, "on_failure": on_failure}
    if isinstance(task, TaskDef) and task.on_failure is None:
        return task.model_copy(update={"on_failure": on_failure})
    return task


class ActivityFile(_Strict):
    activities: list[ActivityDef]
    resources: list[ResourceDef] = Field(default_factory=list)

    @field_validator("resources")
    @classmethod
    def _unique_resources(cls, v: list[ResourceDef]) -> list[ResourceDef]:
        names = [r.name for r in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"resource names must be unique, repeated: {', '.join(dupes)}")
        return v
