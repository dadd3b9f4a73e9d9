"""The payload codec: AES-256-GCM with key ids, optional compression, off unless keys are set.

Every payload a client or worker of this project sends to Temporal (workflow and
activity inputs and results, child inputs, markers' results, memos, and with
``INGEST_CODEC_ENCRYPT_FAILURES`` failure messages and stack traces) goes through
:class:`EncryptionCodec` when ``INGEST_CODEC_KEYS`` or ``INGEST_CODEC_KEYS_FILE`` is set
(:mod:`pipeline.codec_keys`). The Temporal server, and anyone reading its database or
the namespace, then sees only::

    metadata: encoding=binary/encrypted, encryption-key-id=<id>,
              encryption-cipher=AES-256-GCM[, encryption-compression=zlib|zstd]
    data:     nonce (12 random bytes) || AES-256-GCM(key, nonce, inner, aad)

``inner`` is the original ``Payload`` message (metadata and data) serialised, compressed
first when ``INGEST_CODEC_COMPRESSION`` asks and it makes the payload smaller. The
associated data binds the key id and the compression to the ciphertext, so a changed
metadata value fails authentication like changed bytes do. A fresh random 96-bit nonce per
payload: at 2^32 payloads per key the collision chance stays below 2^-32 (NIST SP 800-38D),
so rotate a key well before that (docs/security.md).

Decoding passes through a payload that is not ``binary/encrypted``: histories written
before the codec was turned on stay readable. A payload under a key id no listed key has,
or one that fails authentication, raises :class:`CodecError` naming the key id; in a
worker that fails the workflow task, which Temporal retries until the key is back.

:func:`configured_converter` is what :func:`pipeline.clients.temporal_client` passes to
``Client.connect``; ``ops/codec_api.py`` serves the same codec to the Temporal UI and CLI.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from pipeline.codec_keys import CodecKey, CodecSettings, load_codec_settings, load_keys
from schemas.converter import data_converter
from schemas.errors import IngestError

ENCODING = b"binary/encrypted"
CIPHER = b"AES-256-GCM"
KEY_ID_META = "encryption-key-id"
CIPHER_META = "encryption-cipher"
COMPRESSION_META = "encryption-compression"
NONCE_BYTES = 12
# An authenticated payload was written by a holder of the key; the bound only keeps a
# mistake (or a compromised key holder) from inflating one past memory.
MAX_INNER_BYTES = 64 << 20
_MIN_COMPRESS_BYTES = 256
_AAD = b"kafka-temporal-ingest/codec/v1"


class CodecError(IngestError):
    """A payload the codec cannot decode: unknown key id, failed authentication, bad form."""


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over the whole serialised payload; ``keys[0]`` encrypts, all decrypt."""

    def __init__(self, keys: Sequence[CodecKey], compression: str = "none") -> None:
        if not keys:
            raise ValueError("EncryptionCodec needs at least one key")
        if compression not in ("none", "zlib", "zstd"):
            raise ValueError(f"unknown compression {compression!r}")
        self._encrypt_id = keys[0].id
        self._ciphers = {k.id: AESGCM(k.secret) for k in keys}
        self._compression = compression

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys, the encrypting one first."""
        return tuple(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encode_one(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decode_one(p) for p in payloads]

    def encode_one(self, payload: Payload) -> Payload:
        inner = payload.SerializeToString(deterministic=True)
        method, body = _compress(inner, self._compression)
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._encrypt_id].encrypt(
            nonce, body, _aad(self._encrypt_id, method)
        )
        metadata = {
            "encoding": ENCODING,
            KEY_ID_META: self._encrypt_id.encode(),
            CIPHER_META: CIPHER,
        }
        if method != "none":
            metadata[COMPRESSION_META] = method.encode()
        return Payload(metadata=metadata, data=nonce + sealed)

    def decode_one(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before the codec was on, or not ours to open
        key_id = payload.metadata.get(KEY_ID_META, b"").decode("utf-8", "replace")
        cipher = payload.metadata.get(CIPHER_META, CIPHER)
        if cipher != CIPHER:
            raise CodecError(
                f"payload under key id {key_id!r} uses cipher {cipher.decode(errors='replace')!r};"
                f" this codec only opens {CIPHER.decode()}"
            )
        aes = self._ciphers.get(key_id)
        if aes is None:
            raise CodecError(
                f"payload encrypted with key id {key_id!r}, which the codec keys "
                f"(INGEST_CODEC_KEYS / INGEST_CODEC_KEYS_FILE) do not list; "
                f"listed: {', '.join(self._ciphers)}"
            )
        method = payload.metadata.get(COMPRESSION_META, b"none").decode("utf-8", "replace")
        if method not in ("none", "zlib", "zstd"):
            raise CodecError(f"payload under key id {key_id!r}: unknown compression {method!r}")
        data = payload.data
        if len(data) < NONCE_BYTES + 16:
            raise CodecError(f"payload under key id {key_id!r} is too short to be encrypted")
        try:
            body = aes.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], _aad(key_id, method))
        except InvalidTag:
            raise CodecError(
                f"payload under key id {key_id!r} failed authentication: "
                "it was changed, or encrypted by another key with the same id"
            ) from None
        inner = _decompress(body, method, key_id)
        out = Payload()
        try:
            out.ParseFromString(inner)
        except Exception:
            raise CodecError(f"payload under key id {key_id!r} holds no payload") from None
        return out


def _aad(key_id: str, method: str) -> bytes:
    return b"\0".join((_AAD, key_id.encode(), method.encode()))


def _compress(inner: bytes, method: str) -> tuple[str, bytes]:
    """(method used, bytes): the payload as it is when compressing would not shrink it."""
    if method == "none" or len(inner) < _MIN_COMPRESS_BYTES:
        return "none", inner
    if method == "zlib":
        packed = zlib.compress(inner, 6)
    else:
        import cramjam

        packed = bytes(cramjam.zstd.compress(inner, level=3))
    return (method, packed) if len(packed) < len(inner) else ("none", inner)


def _decompress(body: bytes, method: str, key_id: str) -> bytes:
    if method == "none":
        return body
    try:
        if method == "zlib":
            inflater = zlib.decompressobj()
            out = inflater.decompress(body, MAX_INNER_BYTES)
            if inflater.unconsumed_tail:
                raise CodecError(
                    f"payload under key id {key_id!r} inflates past {MAX_INNER_BYTES >> 20} MiB"
                )
            return out
        import cramjam

        out = bytes(cramjam.zstd.decompress(body))
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(
            f"payload under key id {key_id!r}: {method} data is corrupt: {type(exc).__name__}"
        ) from None
    if len(out) > MAX_INNER_BYTES:
        raise CodecError(
            f"payload under key id {key_id!r} inflates past {MAX_INNER_BYTES >> 20} MiB"
        )
    return out


def build_codec(cfg: CodecSettings) -> EncryptionCodec | None:
    """The codec ``cfg`` configures, or None when it lists no key (:class:`ConfigError` if bad)."""
    keys = load_keys(cfg)
    return EncryptionCodec(keys, cfg.compression) if keys else None


def configured_converter(cfg: CodecSettings | None = None) -> DataConverter:
    """The data converter every Temporal client of this project uses: the project's
    (``schemas.converter``), with the codec when keys are set. Reads the environment
    when ``cfg`` is None; :class:`pipeline.settings.ConfigError` names a bad setting."""
    cfg = cfg or load_codec_settings()
    codec = build_codec(cfg)
    return data_converter(codec, encode_failures=codec is not None and cfg.encrypt_failures)


def is_encrypted(payload: Payload) -> bool:
    """Whether ``payload`` is one this codec wrote."""
    return payload.metadata.get("encoding") == ENCODING


def needs_reencrypting(payload: Payload, codec: PayloadCodec | None) -> bool:
    """Whether a stored payload (a schedule's action) should be written again: the codec is
    on and the payload is in plaintext, or under another key than the one that encrypts now
    (a rotation: rewritten, it no longer needs the old key)."""
    if not isinstance(codec, EncryptionCodec):
        return False
    key_id = payload.metadata.get(KEY_ID_META, b"").decode("utf-8", "replace")
    return not is_encrypted(payload) or key_id != codec.key_ids[0]
