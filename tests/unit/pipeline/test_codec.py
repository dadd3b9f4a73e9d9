"""The payload codec: AES-256-GCM with key ids, rotation, tamper detection, compression,
and the converter every client gets (``pipeline.codec``)."""

from __future__ import annotations

import base64
import dataclasses
import os

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes
from temporalio.exceptions import ApplicationError

from pipeline.codec import (
    COMPRESSION_META,
    ENCODING,
    KEY_ID_META,
    CodecError,
    EncryptionCodec,
    configured_converter,
    is_encrypted,
)
from pipeline.codec_keys import CodecKey, CodecSettings
from schemas.converter import DATA_CONVERTER
from schemas.workflow_io import TaskSpec

SECRET = "pii-4f1c9e-very-recognisable"


def _key(kid: str) -> CodecKey:
    return CodecKey(kid, os.urandom(32))


def _plain(data: bytes = b'{"email":"' + SECRET.encode() + b'"}') -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


def _settings(*keys: CodecKey, **kw: object) -> CodecSettings:
    text = ",".join(f"{k.id}:{base64.b64encode(k.secret).decode()}" for k in keys)
    return CodecSettings(keys=text, **kw)  # type: ignore[arg-type]


async def test_round_trip_hides_the_plaintext_and_names_the_key() -> None:
    codec = EncryptionCodec([_key("k1")])
    (enc,) = await codec.encode([_plain()])
    assert enc.metadata["encoding"] == ENCODING
    assert enc.metadata[KEY_ID_META] == b"k1"
    assert SECRET.encode() not in enc.SerializeToString()
    assert is_encrypted(enc)
    (dec,) = await codec.decode([enc])
    assert dec == _plain()


async def test_each_payload_gets_its_own_nonce() -> None:
    codec = EncryptionCodec([_key("k1")])
    a, b = await codec.encode([_plain(), _plain()])
    assert a.data[:12] != b.data[:12]
    assert a.data != b.data


async def test_rotation_new_key_encrypts_old_key_still_decrypts() -> None:
    old, new = _key("2025-01"), _key("2026-01")
    before = EncryptionCodec([old])
    after = EncryptionCodec([new, old])  # the new key listed first
    (written_before,) = await before.encode([_plain()])
    assert (await after.decode([written_before]))[0] == _plain()
    (written_after,) = await after.encode([_plain()])
    assert written_after.metadata[KEY_ID_META] == b"2026-01"
    # A process that was not given the new key names the key it lacks.
    with pytest.raises(CodecError, match=r"key id '2026-01'.*listed: 2025-01"):
        await before.decode([written_after])


async def test_a_changed_byte_or_metadata_value_fails_authentication() -> None:
    k1, k2 = _key("k1"), _key("k2")
    codec = EncryptionCodec([k1, k2])
    (enc,) = await codec.encode([_plain(b"x" * 1000)])
    flipped = Payload()
    flipped.CopyFrom(enc)
    flipped.data = enc.data[:-1] + bytes([enc.data[-1] ^ 1])
    with pytest.raises(CodecError, match=r"k1.*failed authentication"):
        await codec.decode([flipped])
    relabelled = Payload()
    relabelled.CopyFrom(enc)
    relabelled.metadata[KEY_ID_META] = b"k2"  # another listed key: the key id is bound
    with pytest.raises(CodecError, match="failed authentication"):
        await codec.decode([relabelled])
    truncated = Payload(metadata=dict(enc.metadata), data=enc.data[:20])
    with pytest.raises(CodecError, match="too short"):
        await codec.decode([truncated])


@pytest.mark.parametrize("method", ["zlib", "zstd"])
async def test_compression_is_recorded_and_bound(method: str) -> None:
    codec = EncryptionCodec([_key("k1")], method)
    big = _plain(b'{"rows":"' + b"abcdefgh" * 2000 + b'"}')
    (enc,) = await codec.encode([big])
    assert enc.metadata[COMPRESSION_META] == method.encode()
    assert len(enc.data) < len(big.data) // 4
    assert (await codec.decode([enc]))[0] == big
    # Small payloads are not compressed, and say so by leaving the field out.
    (small,) = await codec.encode([_plain(b"{}")])
    assert COMPRESSION_META not in small.metadata
    # The compression flag is authenticated too.
    stripped = Payload()
    stripped.CopyFrom(enc)
    del stripped.metadata[COMPRESSION_META]
    with pytest.raises(CodecError, match="failed authentication"):
        await codec.decode([stripped])


async def test_incompressible_data_is_stored_uncompressed() -> None:
    codec = EncryptionCodec([_key("k1")], "zlib")
    (enc,) = await codec.encode([_plain(os.urandom(4096))])
    assert COMPRESSION_META not in enc.metadata


async def test_payloads_written_before_the_codec_pass_through() -> None:
    codec = EncryptionCodec([_key("k1")])
    assert (await codec.decode([_plain()]))[0] == _plain()


def test_no_key_means_no_codec() -> None:
    assert configured_converter(CodecSettings()) is DATA_CONVERTER


async def test_the_converter_encrypts_values_and_failures() -> None:
    conv = configured_converter(_settings(_key("k1")))
    assert conv.payload_codec is not None
    assert conv.payload_converter_class is DATA_CONVERTER.payload_converter_class
    spec = TaskSpec("webhook", 0, payload={"email": SECRET}, config={})
    (payload,) = await conv.encode([spec])
    assert SECRET.encode() not in payload.SerializeToString()
    (back,) = await conv.decode([payload], [TaskSpec])
    assert back == spec
    failure = Failure()
    await conv.encode_failure(ApplicationError(f"could not mail {SECRET}"), failure)
    assert SECRET.encode() not in failure.SerializeToString()
    assert failure.message == "Encoded failure"
    err = await conv.decode_failure(failure)
    assert SECRET in str(err)


def test_failures_stay_plain_when_asked() -> None:
    conv = configured_converter(_settings(_key("k1"), encrypt_failures=False))
    assert conv.payload_codec is not None
    assert not isinstance(conv.failure_converter, DefaultFailureConverterWithEncodedAttributes)
    on = configured_converter(_settings(_key("k1")))
    assert isinstance(on.failure_converter, DefaultFailureConverterWithEncodedAttributes)


def test_configured_converter_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INGEST_CODEC_KEYS_FILE", raising=False)
    monkeypatch.setenv("INGEST_CODEC_KEYS", f"env1:{base64.b64encode(os.urandom(32)).decode()}")
    codec = configured_converter().payload_codec
    assert isinstance(codec, EncryptionCodec)
    assert codec.key_ids == ("env1",)
    monkeypatch.setenv("INGEST_CODEC_KEYS", "")
    assert configured_converter() is DATA_CONVERTER


def test_codec_key_repr_hides_the_key() -> None:
    key = CodecKey("k1", b"\x01" * 32)
    assert "k1" in repr(key)
    assert "\\x01" not in repr(key)
    assert dataclasses.asdict(key)["id"] == "k1"
