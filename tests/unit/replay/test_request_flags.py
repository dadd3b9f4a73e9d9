"""``ingest replay``'s flags become the same ReplayRequest the ops API runs."""

from __future__ import annotations

from datetime import UTC, datetime

from app.cli import build_parser
from app.commands.replay import _request
from replay.dlq import DLQ_GROUP
from replay.request import ReplayRequest


def test_range_flags() -> None:
    args = build_parser().parse_args(
        ["replay", "--topic", "t", "--from-time", "2026-01-02T03:04:05Z", "--partitions", "0,2"]
    )
    assert _request(args) == ReplayRequest(
        dry_run=False,
        topic="t",
        from_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        partitions=(0, 2),
    )


def test_dlq_flags() -> None:
    args = build_parser().parse_args(["replay", "--dlq", "--reason", "bad_json", "--dry-run"])
    assert _request(args) == ReplayRequest(dry_run=True, dlq=True, reason="bad_json")
    assert _request(args).group == DLQ_GROUP
    args = build_parser().parse_args(["replay", "--dlq", "--group", "g2"])
    assert _request(args).group == "g2"
