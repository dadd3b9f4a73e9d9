"""Every DLQ reason the code can write is documented in docs/message-formats.md (issue 34).

The reasons are read from the code (the sets each component starts its DLQ counter with),
not from a list here: a new reason without a row in the table fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingress.service import DLQ_REASONS as INGRESS
from relay.refusals import DLQ_REASONS as RELAY
from router.service import DLQ_REASONS as ROUTER
from workers.flow.window_dead_letters import DLQ_REASONS as WINDOWS

DOC = Path(__file__).resolve().parents[2] / "docs" / "message-formats.md"


def _documented() -> set[str]:
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", DOC.read_text(), flags=re.MULTILINE)
    return set(rows) - {"dlq_reason"}  # the header row


def test_every_dlq_reason_has_a_row_in_the_table():
    reasons = set(INGRESS) | set(ROUTER) | set(RELAY) | set(WINDOWS)
    assert {"bad_id", "nul_character", "bad_flow_key", "route_failed"} <= reasons
    missing = reasons - _documented()
    assert not missing, f"DLQ reasons without a row in {DOC.name}: {sorted(missing)}"


def test_the_table_names_no_reason_the_code_lacks():
    stale = _documented() - set(INGRESS) - set(ROUTER) - set(RELAY) - set(WINDOWS)
    assert not stale, f"rows in {DOC.name} for reasons no component writes: {sorted(stale)}"
