"""Reading a small secret file (codec keys, webhook secrets): bounded in bytes, UTF-8,
and every problem said in words that never quote the content."""

from __future__ import annotations

from pathlib import Path

from schemas.errors import IngestError


class UnreadableFile(IngestError):
    """The file cannot serve: missing, unreadable, too large or not UTF-8 (the message
    says which, naming the path; the caller adds the setting it came from)."""


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"


def read_capped_text(path: Path, limit: int) -> str:
    """``path``'s text, read no further than ``limit`` bytes (one more, to tell a file
    over the cap from one at it)."""
    try:
        with path.open("rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > limit:
        raise UnreadableFile(f"{path} is larger than {_size(limit)}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableFile(f"{path} is not UTF-8 text") from None
