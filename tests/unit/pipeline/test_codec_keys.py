"""Codec keys from ``INGEST_CODEC_KEYS`` or ``INGEST_CODEC_KEYS_FILE``: a bad key fails at
start-up with a ``ConfigError`` naming the setting, never the key material."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from pipeline.codec_keys import CodecSettings, load_codec_settings, load_keys
from pipeline.settings import ConfigError


def _b64(n: int = 32, *, urlsafe: bool = False) -> str:
    raw = os.urandom(n)
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()


def test_keys_in_order_first_encrypts() -> None:
    keys = load_keys(CodecSettings(keys=f"new:{_b64()}, old:{_b64()}"))  # type: ignore[arg-type]
    assert [k.id for k in keys] == ["new", "old"]
    assert all(len(k.secret) == 32 for k in keys)


def test_url_safe_and_unpadded_base64_are_accepted() -> None:
    key = _b64(urlsafe=True).rstrip("=")
    (k,) = load_keys(CodecSettings(keys=f"a:{key}"))  # type: ignore[arg-type]
    assert len(k.secret) == 32


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("k1:" + base64.b64encode(b"short-key").decode(), r"entry 1 \(key 'k1'\) is 9 bytes"),
        ("k1:!!!notbase64!!!", r"entry 1 \(key 'k1'\): bad base64"),
        ("k1:{k},k1:{k}", r"entry 2: duplicate key id 'k1'"),
        ("nocolon", r"entry 1 is not id:base64key"),
        (":{k}", r"entry 1 is not id:base64key"),
        ("bad id:{k}", r"entry 1: key id must be"),
    ],
)
def test_bad_keys_name_the_setting(value: str, message: str) -> None:
    key = _b64()
    with pytest.raises(ConfigError, match=r"^invalid setting INGEST_CODEC_KEYS: " + message) as e:
        load_keys(CodecSettings(keys=value.replace("{k}", key)))  # type: ignore[arg-type]
    assert key not in str(e.value)


def test_the_message_never_quotes_the_key() -> None:
    wrong = base64.b64encode(os.urandom(16)).decode()
    with pytest.raises(ConfigError) as e:
        load_keys(CodecSettings(keys=f"k1:{wrong}"))  # type: ignore[arg-type]
    assert wrong not in str(e.value)
    assert "AES-256 needs 32" in str(e.value)


def test_keys_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# rotated 2026-01\n\nnew:{_b64()}\nold:{_b64()}\n")
    keys = load_keys(CodecSettings(keys_file=path))
    assert [k.id for k in keys] == ["new", "old"]


def test_keys_file_errors_name_the_setting_and_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"a:{_b64()}\n# comment\nb:{_b64(31)}\n")
    with pytest.raises(ConfigError, match=rf"INGEST_CODEC_KEYS_FILE: {path} line 3 \(key 'b'\)"):
        load_keys(CodecSettings(keys_file=path))
    with pytest.raises(ConfigError, match="INGEST_CODEC_KEYS_FILE: cannot read"):
        load_keys(CodecSettings(keys_file=tmp_path / "missing"))
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ConfigError, match=r"INGEST_CODEC_KEYS_FILE: .* lists no key"):
        load_keys(CodecSettings(keys_file=tmp_path / "empty"))


def test_both_sources_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"a:{_b64()}\n")
    with pytest.raises(ConfigError, match=r"INGEST_CODEC_KEYS: set .* not both"):
        load_keys(CodecSettings(keys=f"a:{_b64()}", keys_file=path))  # type: ignore[arg-type]


def test_none_set_means_no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_CODEC_KEYS", " ")
    monkeypatch.setenv("INGEST_CODEC_KEYS_FILE", "")
    assert load_keys(load_codec_settings()) == ()


def test_settings_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_CODEC_COMPRESSION", "brotli")
    with pytest.raises(ConfigError, match="invalid setting INGEST_CODEC_COMPRESSION"):
        load_codec_settings()
    monkeypatch.setenv("INGEST_CODEC_COMPRESSION", "ZSTD")
    assert load_codec_settings().compression == "zstd"
    monkeypatch.setenv("INGEST_CODEC_CORS_ORIGINS", "http://ui.example:8080/path")
    with pytest.raises(ConfigError, match="invalid setting INGEST_CODEC_CORS_ORIGINS"):
        load_codec_settings()
    monkeypatch.setenv("INGEST_CODEC_CORS_ORIGINS", "*")
    with pytest.raises(ConfigError, match="invalid setting INGEST_CODEC_CORS_ORIGINS"):
        load_codec_settings()


def test_default_origins_are_the_local_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INGEST_CODEC_CORS_ORIGINS", raising=False)
    assert load_codec_settings().origins() == ("http://127.0.0.1:8233", "http://localhost:8233")
