"""A schedule's fingerprint memo read through the client's converter, payload codec
included (``scheduler.sync.current_fingerprint``): a schedule written in plaintext, under
a key being rotated out, or not decodable is rewritten (None), else compared."""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import ScheduleActionStartWorkflow

from pipeline.codec import EncryptionCodec
from pipeline.codec_keys import CodecKey
from scheduler.spec import FINGERPRINT_MEMO
from scheduler.sync import current_fingerprint
from schemas.converter import DATA_CONVERTER, data_converter

OLD, NEW = CodecKey("old", os.urandom(32)), CodecKey("new", os.urandom(32))


def _desc(memo_payload: Payload) -> Any:
    action = ScheduleActionStartWorkflow(
        "CronFire", id="d", task_queue="q", memo={FINGERPRINT_MEMO: memo_payload}
    )
    return SimpleNamespace(id="activity-schedule-x", schedule=SimpleNamespace(action=action))


def _plain(value: str) -> Payload:
    return DATA_CONVERTER.payload_converter.to_payloads([value])[0]


async def test_plaintext_without_a_codec_is_compared() -> None:
    assert await current_fingerprint(_desc(_plain("abc")), DATA_CONVERTER) == "abc"


async def test_plaintext_with_the_codec_on_is_rewritten() -> None:
    conv = data_converter(EncryptionCodec([NEW]))
    assert await current_fingerprint(_desc(_plain("abc")), conv) is None


async def test_encrypted_under_the_current_key_is_compared() -> None:
    conv = data_converter(EncryptionCodec([NEW, OLD]))
    (payload,) = await conv.encode(["abc"])
    assert await current_fingerprint(_desc(payload), conv) == "abc"


async def test_encrypted_under_a_rotated_out_key_is_rewritten() -> None:
    (payload,) = await data_converter(EncryptionCodec([OLD])).encode(["abc"])
    rotated = data_converter(EncryptionCodec([NEW, OLD]))
    assert await current_fingerprint(_desc(payload), rotated) is None


async def test_undecodable_is_rewritten_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    (payload,) = await data_converter(EncryptionCodec([OLD])).encode(["abc"])
    with caplog.at_level(logging.WARNING, logger="scheduler.sync"):
        assert await current_fingerprint(_desc(payload), DATA_CONVERTER) is None
        new_only = data_converter(EncryptionCodec([NEW]))
        assert await current_fingerprint(_desc(payload), new_only) is None
    assert "does not decode" in caplog.text
