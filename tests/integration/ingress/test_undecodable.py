"""A record batch that ingress cannot decode: one line naming where, exit 1, nothing skipped.

The codec is made unavailable in the ingress process alone (``import cramjam`` fails
there), as on an install without the codec libraries. A librdkafka
producer writes an lz4 batch after three plain events that ingress has already
committed. Ingress must exit 1 with one log line naming the topic, partition and offset
of the batch and the cause, and without committing past the batch. A normal ingress
started afterwards then delivers the batch: nothing was skipped.
"""

from __future__ import annotations

import uuid

from tests.support import db
from tests.support.kafka import committed, produce_librdkafka, read_until
from tests.support.process import hide_codecs, start_ingress
from tests.support.wait import eventually


async def test_undecodable_batch_is_one_line_and_exit_1_and_is_not_skipped(stack, topics, tmp_path):
    group = f"ingress-{uuid.uuid4()}"
    plain = [db.event("t", f"plain-{i}") for i in range(3)]
    packed = [db.event("t", f"lz4-{i}") for i in range(3)]
    produce_librdkafka(stack.kafka, topics.raw, plain, "none", partition=0)

    quiet = {"INGEST_LOG_LEVEL": "WARNING"}
    proc = start_ingress(stack, topics, group, **quiet, **hide_codecs(tmp_path))
    try:

        async def plain_committed() -> bool:
            return (await committed(stack.kafka, group, topics.raw)).get(0) == 3

        await eventually(plain_committed, 60, "the plain events committed")
        produce_librdkafka(stack.kafka, topics.raw, packed, "lz4", partition=0)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    lines = (out + err).decode(errors="replace").strip().splitlines()
    assert proc.returncode == 1, lines
    assert len(lines) == 1, lines  # one line: no traceback, no retry loop
    line = lines[0]
    assert "ERROR" in line and f"{topics.raw} partition 0 offset 3" in line, line
    assert "UnsupportedCodecError" in line and "lz4" in line, line
    assert (await committed(stack.kafka, group, topics.raw)).get(0) == 3  # not past the batch

    # With the codec, the same group reads the batch it stopped at.
    proc = start_ingress(stack, topics, group, **quiet)
    try:

        async def all_committed() -> bool:
            return (await committed(stack.kafka, group, topics.raw)).get(0) == 6

        await eventually(all_committed, 60, "the lz4 batch committed")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    events = await read_until(stack.kafka, topics.events, 6)
    assert sorted(m.value.count(b"lz4-") for m in events) == [0, 0, 0, 1, 1, 1]
