"""The payload codec's settings and keys: ``INGEST_CODEC_*``, checked once at start-up.

Keys come from ``INGEST_CODEC_KEYS="id1:base64,id2:base64"`` or from the file named by
``INGEST_CODEC_KEYS_FILE`` (one ``id:base64`` a line; blank lines and ``#`` comments are
skipped), never both. Each key is 32 random bytes (AES-256) in standard or URL-safe
base64; its id is 1-64 characters of ``[A-Za-z0-9._-]``, stored in every payload it
encrypts. The first key listed encrypts; every key listed decrypts, so a rotation is:
add the new key first, roll every process, and drop the old key once no history that
needs it is kept (docs/security.md, "Payload encryption and the codec server").

No key set means no codec: payloads go to Temporal as today. A bad value raises
:class:`pipeline.settings.ConfigError` naming the setting and the key's position and id,
never its bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.secret_files import UnreadableFile, read_capped_text
from pipeline.settings import ConfigError, build

KEYS_ENV = "INGEST_CODEC_KEYS"
KEYS_FILE_ENV = "INGEST_CODEC_KEYS_FILE"
KEY_BYTES = 32  # AES-256
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_MAX_KEYS_FILE_BYTES = 1 << 20

LOCAL_UI_ORIGINS = "http://127.0.0.1:8233,http://localhost:8233"


class CodecSettings(BaseSettings):
    """The payload codec and its codec server (env prefix ``INGEST_CODEC_``)."""

    model_config = SettingsConfigDict(
        env_prefix="INGEST_CODEC_", frozen=True, extra="ignore", populate_by_name=True
    )

    # "id1:base64key,id2:base64key": the first encrypts, all decrypt.
    keys: SecretStr | None = None
    # The same, one "id:base64key" a line, from a file (e.g. a mounted Kubernetes Secret).
    keys_file: Path | None = None
    # Compress before encrypting (only when it makes the payload smaller). zstd needs
    # cramjam (installed with aiokafka[zstd]). Off by default: see docs/security.md.
    compression: Literal["none", "zlib", "zstd"] = "none"
    # Failure messages and stack traces go into the failure's encoded attributes, so the
    # codec encrypts them too (Temporal's DefaultFailureConverterWithEncodedAttributes).
    encrypt_failures: bool = True
    # Origins allowed to call the codec server from a browser (the Temporal UI), comma-separated.
    cors_origins: str = Field(LOCAL_UI_ORIGINS)

    @field_validator("keys", mode="before")
    @classmethod
    def _blank_is_unset(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("keys_file", mode="before")
    @classmethod
    def _blank_path_is_unset(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("compression", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("compression")
    @classmethod
    def _zstd_installed(cls, v: str) -> str:
        if v == "zstd":
            try:
                import cramjam  # noqa: F401
            except ImportError:
                raise ValueError("zstd needs cramjam: pip install cramjam") from None
        return v

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, v: str) -> str:
        for origin in _split(v):
            if origin == "*" or not re.fullmatch(r"https?://[^/\s?#]+", origin):
                raise ValueError(
                    f"{origin!r} is not an origin: scheme://host[:port], no path, no '*'"
                )
        return v

    def origins(self) -> tuple[str, ...]:
        """``cors_origins`` as a tuple."""
        return tuple(_split(self.cors_origins))


def _split(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


def load_codec_settings(**overrides: object) -> CodecSettings:
    """Environment plus non-None overrides; :class:`ConfigError` names the bad variable."""
    return build(CodecSettings, **overrides)


@dataclass(frozen=True)
class CodecKey:
    """One AES-256 key and the id every payload it encrypts records."""

    id: str
    secret: bytes

    def __repr__(self) -> str:  # never the key bytes
        return f"CodecKey(id={self.id!r})"


def load_keys(cfg: CodecSettings) -> tuple[CodecKey, ...]:
    """The keys ``cfg`` names, first (encrypting) key first; empty when none is set.

    Raises :class:`ConfigError` naming ``INGEST_CODEC_KEYS`` or ``INGEST_CODEC_KEYS_FILE``.
    """
    if cfg.keys is not None and cfg.keys_file is not None:
        raise ConfigError(
            f"invalid setting {KEYS_ENV}: set {KEYS_ENV} or {KEYS_FILE_ENV}, not both"
        )
    if cfg.keys is not None:
        entries = [(f"entry {n}", e) for n, e in enumerate(_split(cfg.keys.get_secret_value()), 1)]
        return parse_keys(entries, KEYS_ENV)
    if cfg.keys_file is not None:
        return parse_keys(_file_entries(cfg.keys_file), KEYS_FILE_ENV)
    return ()


def _file_entries(path: Path) -> list[tuple[str, str]]:
    try:
        text = read_capped_text(path, _MAX_KEYS_FILE_BYTES)
    except UnreadableFile as exc:
        raise ConfigError(f"invalid setting {KEYS_FILE_ENV}: {exc}") from None
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append((f"{path} line {n}", line))
    if not entries:
        raise ConfigError(f"invalid setting {KEYS_FILE_ENV}: {path} lists no key")
    return entries


def parse_keys(entries: list[tuple[str, str]], setting: str) -> tuple[CodecKey, ...]:
    """``(where, "id:base64")`` pairs as keys; :class:`ConfigError` names ``setting``,
    where the bad entry is and its id (never the key material)."""
    if not entries:
        raise ConfigError(f"invalid setting {setting}: lists no key")
    keys: list[CodecKey] = []
    seen: set[str] = set()
    for where, entry in entries:
        key_id, sep, encoded = entry.partition(":")
        key_id, encoded = key_id.strip(), encoded.strip()
        if not sep or not key_id:
            raise ConfigError(f"invalid setting {setting}: {where} is not id:base64key")
        if not _KEY_ID.fullmatch(key_id):
            raise ConfigError(
                f"invalid setting {setting}: {where}: key id must be 1-64 characters among "
                "ASCII letters, digits, '.', '_' and '-'"
            )
        if key_id in seen:
            raise ConfigError(f"invalid setting {setting}: {where}: duplicate key id {key_id!r}")
        seen.add(key_id)
        secret = _decode_key(encoded)
        if secret is None:
            raise ConfigError(f"invalid setting {setting}: {where} (key {key_id!r}): bad base64")
        if len(secret) != KEY_BYTES:
            raise ConfigError(
                f"invalid setting {setting}: {where} (key {key_id!r}) is {len(secret)} bytes; "
                f"AES-256 needs {KEY_BYTES} (generate one with "
                'python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())")'
            )
        keys.append(CodecKey(key_id, secret))
    return tuple(keys)


def _decode_key(encoded: str) -> bytes | None:
    if not encoded:
        return None
    padded = encoded + "=" * (-len(encoded) % 4)
    altchars = b"-_" if ("-" in encoded or "_" in encoded) else None
    try:
        return base64.b64decode(padded, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        return None
