"""Approval tasks: a person's decision, with SLA timers, reminders, escalation and
auto-reject, waited for inside ``TaskInstanceWorkflow`` (see docs/approvals.md).

* ``config``: the task's config model; ``rules``: who may decide what, when;
* ``machine``: the wait, a state machine (workflow code); ``stages``: an approval gates
  later tasks; ``sweep``: close approvals whose workflow closed without closing them;
* ``activities`` / ``store``: notices to Kafka, the audit trail in PostgreSQL;
* ``metrics``: the approval metrics; ``part``: the worker part; ``api``: what the ops service calls.
"""

from schemas.approval_io import APPROVAL_TASK_TYPE

__all__ = ["APPROVAL_TASK_TYPE"]
