"""The security headers of every answer, and the console's Content Security Policy.

The console is one static page whose script and style are inline: its CSP allows
exactly those two blocks by their SHA-256 (computed here, at start-up, from the page
that is served), so no other script runs on the console's origin, ``'unsafe-inline'``
included. Every other answer gets ``default-src 'none'``. All of them: no framing
(``frame-ancestors 'none'``, ``X-Frame-Options: DENY``), ``nosniff``,
``Referrer-Policy: no-referrer``, and ``Cache-Control: no-store`` (answers carry data).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

_BLOCK = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S) for tag in ("script", "style")}

COMMON: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def sha256_source(text: str) -> str:
    """A CSP hash source for an inline block's exact text."""
    digest = hashlib.sha256(text.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def inline_hashes(html: str, tag: str) -> list[str]:
    return [sha256_source(m) for m in _BLOCK[tag].findall(html)]


def console_csp(html: str) -> str:
    """The console's policy: its own inline script and style only, fetches to itself."""
    scripts = " ".join(inline_hashes(html, "script")) or "'none'"
    styles = " ".join(inline_hashes(html, "style")) or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src {styles}; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


def docs_csp(html: str, cdn: str) -> str:
    """``/docs`` (``INGEST_OPS_API_DOCS=1``): Swagger UI's files from ``cdn``, its inline
    starter script by hash."""
    scripts = " ".join([cdn, *inline_hashes(html, "script")])
    return (
        f"default-src 'none'; script-src {scripts}; style-src {cdn}; "
        f"img-src 'self' data: https://fastapi.tiangolo.com; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def add_headers(headers: Iterable[tuple[bytes, bytes]], csp: str) -> list[tuple[bytes, bytes]]:
    """``headers`` plus the security headers it does not already set."""
    out = list(headers)
    have = {name.lower() for name, _ in out}
    for name, value in (*COMMON, (b"content-security-policy", csp.encode())):
        if name not in have:
            out.append((name, value))
    return out
