"""The KRaft cluster id never starts with '-' (the storage tool would read it as an option)."""

from __future__ import annotations

import uuid

from devstack.kafka import _kafka_cluster_id


def test_an_id_starting_with_a_dash_is_drawn_again() -> None:
    # 0xf8 as the first byte encodes to '-' in URL-safe base64.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    cid = _kafka_cluster_id(lambda: next(draws))
    assert cid == "AQEBAQEBAQEBAQEBAQEBAQ"
    assert not cid.startswith("-")


def test_ids_are_22_url_safe_characters() -> None:
    ids = {_kafka_cluster_id() for _ in range(500)}
    assert len(ids) == 500
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
