"""The ``config`` of an ``approval`` task, validated (pydantic) at plan time and again
when the task starts (a bad config fails the task naming the field).

```yaml
- type: approval
  config:
    approvers: [alice, bob]          # who decides (one name or a list)
    sla_seconds: 172800              # how long the approvers have (48 h)
    remind_every_seconds: 28800      # a reminder every 8 h while waiting (omit: none)
    escalate_to: [carol]             # may decide too once the SLA has passed
    escalation_sla_seconds: 86400    # then auto-reject after this much more (default: sla_seconds)
    resubmission_timeout_seconds: 604800  # after request_changes (7 days)
    topic: approvals.notices         # where notices go (default INGEST_EMIT_TOPIC)
```

Pure and deterministic: workflow code imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from workers.errors import TaskConfigError

_WEEK = 7 * 24 * 3600.0


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Names = Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_as_list)]


class ApprovalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: Names = Field(min_length=1)
    sla_seconds: float = Field(gt=0)
    remind_every_seconds: float | None = Field(None, gt=0)
    escalate_to: Names = Field(default_factory=list)
    escalation_sla_seconds: float | None = Field(None, gt=0)
    resubmission_timeout_seconds: float = Field(_WEEK, gt=0)
    topic: str | None = Field(None, min_length=1)

    @property
    def escalation_seconds(self) -> float:
        return self.escalation_sla_seconds or self.sla_seconds


def approval_config(config: Mapping[str, Any]) -> ApprovalConfig:
    """The parsed config; :class:`TaskConfigError` names the first bad field
    (``config.sla_seconds: ...``)."""
    try:
        return ApprovalConfig.model_validate(dict(config))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TaskConfigError(f"approval config.{where}: {err['msg']}") from None
