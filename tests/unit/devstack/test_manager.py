"""The ``ingest stack up`` output lines."""

from __future__ import annotations

import pytest
from devstack.manager import topics_line

TOPICS = ["ingest.raw", "ingest.events", "ingest.dlq", "ingest.tasks"]


@pytest.mark.parametrize(
    ("created", "state"),
    [
        (TOPICS, "created"),
        ([], "already present"),
        (["ingest.tasks"], "created 1 of 4"),
    ],
)
def test_topics_line_names_each_topic_once(created: list[str], state: str) -> None:
    line = topics_line(TOPICS, created, 6)
    assert line.split()[0] == "topics"
    assert state in line
    for topic in TOPICS:
        assert line.count(topic) == 1, line
    assert line.endswith("(6 partitions)")
