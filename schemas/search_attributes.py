"""The custom Temporal search attributes of pause-and-fix, named once.

A paused ``TaskInstanceWorkflow`` upserts them, and the ops service finds paused
tasks through visibility with them. They are Keyword attributes and must be
registered on the namespace before a workflow upserts them:
``temporal server start-dev --search-attribute Name=Keyword`` locally
(stack/devstack), the operator service on a cluster (``ingest temporal setup``).
The names must not change: visibility queries and dashboards use them.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

STATUS = SearchAttributeKey.for_keyword("IngestStatus")
FAILED_TASK = SearchAttributeKey.for_keyword("IngestFailedTask")
ACTIVITY_ID = SearchAttributeKey.for_keyword("IngestActivityId")

KEYWORDS: tuple[str, ...] = (STATUS.name, FAILED_TASK.name, ACTIVITY_ID.name)

PENDING_FIX = "PENDING_FIX"
RETRYING = "RETRYING"
RESOLVED = "RESOLVED"
