"""Who is acting: the identity a request authenticates as (``ops.guard`` resolves it).

Three sources, checked in this order:

* **An authenticating proxy** (``INGEST_OPS_IDENTITY_HEADER``, e.g. ``X-Forwarded-User``):
  its value names the person, but only on a connection from an address in
  ``INGEST_OPS_TRUSTED_PROXIES``; from any other address the header is ignored.
* **A person's token** (``INGEST_OPS_TOKENS_FILE``): lines ``name:sha256-hex-of-token``
  (``#`` comments and blank lines ignored). The SHA-256 of the bearer token given is
  compared with every line's hash in constant time; the file holds no token itself.
* **The shared token** (``INGEST_OPS_TOKEN``): the identity ``INGEST_OPS_TOKEN_NAME``
  (``ops-token``). It names no person, so it cannot decide approvals (``ops.approvals``).

Tokens are compared with ``hmac.compare_digest`` and never logged or echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from schemas.errors import IngestError

SHARED: Final = "shared-token"
PERSON: Final = "person-token"
PROXY: Final = "proxy"
Kind = Literal["shared-token", "person-token", "proxy"]

MIN_TOKEN_CHARS = 32
MAX_NAME_CHARS = 200
_HEX = re.compile(r"[0-9a-f]{64}")
# A name is shown in audit rows, the console and logs: printable, no separator, no edge space.
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f:]")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Identity:
    name: str
    kind: Kind

    @property
    def person(self) -> bool:
        """A person's token or a proxy's header; the shared token names no person."""
        return self.kind != SHARED


class IdentityError(IngestError):
    """A tokens file or identity setting that cannot be used (refused at start-up)."""


def hash_token(token: str) -> str:
    """The hex SHA-256 of ``token``: what ``INGEST_OPS_TOKENS_FILE`` holds for it."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_local_token() -> str:
    """A random per-process token (``--insecure-local``, ``ingest run``): 43 characters."""
    return secrets.token_urlsafe(32)


def console_url(host: str, port: int, token: str) -> str:
    """The console's address with the token in the fragment (never sent to a server,
    so it is in no access log and no Referer); the console stores it and strips it."""
    return f"http://{host}:{port}/#token={token}"


def check_name(name: str) -> str | None:
    """Why ``name`` cannot name a person (None: it can)."""
    if not name or name != name.strip():
        return "empty, or with leading or trailing spaces"
    if len(name) > MAX_NAME_CHARS:
        return f"longer than {MAX_NAME_CHARS} characters"
    if _BAD_NAME.search(name):
        return "holds a control character or ':'"
    return None


def load_tokens_file(path: Path) -> list[tuple[str, bytes]]:
    """``(name, sha256 digest)`` per line; :class:`IdentityError` names the line at fault."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise IdentityError(f"cannot read {path}: {exc.strerror or exc}") from None
    out: list[tuple[str, bytes]] = []
    seen: set[bytes] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, digest = line.rpartition(":")
        digest = digest.strip().lower()
        if not sep or not _HEX.fullmatch(digest):
            raise IdentityError(f"{path} line {n}: want name:sha256-hex-of-token (64 hex digits)")
        name = name.strip()
        problem = check_name(name)
        if problem is not None:
            raise IdentityError(f"{path} line {n}: the name is {problem}")
        value = bytes.fromhex(digest)
        if value in seen:
            raise IdentityError(f"{path} line {n}: the same token hash as an earlier line")
        seen.add(value)
        out.append((name, value))
    return out


def parse_networks(spec: str) -> list[Network]:
    """``10.0.0.5, 10.1.0.0/16, ::1``; :class:`IdentityError` names a bad entry."""
    out = []
    for part in spec.split(","):
        item = part.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise IdentityError(f"not an address or network: {item!r}") from None
    return out


class Authenticator:
    """Resolves a request's identity from its peer address and headers (lower-case names)."""

    def __init__(
        self,
        shared: str | None,
        shared_name: str,
        people: Iterable[tuple[str, bytes]] = (),
        header: str | None = None,
        proxies: Iterable[Network] = (),
    ) -> None:
        self._shared = hashlib.sha256(shared.encode()).digest() if shared is not None else None
        self._shared_name = shared_name
        self._people = list(people)
        self._header = header.lower() if header else None
        self._proxies = list(proxies)

    @property
    def proxy_identity(self) -> bool:
        return self._header is not None

    def trusted_proxy(self, address: str | None) -> bool:
        if address is None or not self._proxies:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self._proxies)

    def from_proxy(self, address: str | None, headers: Mapping[str, str]) -> Identity | None:
        """The proxy's header, only from a pinned proxy address (None: not given here)."""
        if self._header is None or not self.trusted_proxy(address):
            return None
        name = headers.get(self._header, "").strip()
        if not name or check_name(name) is not None:
            return None
        return Identity(name, PROXY)

    def from_token(self, token: str) -> Identity | None:
        """The identity ``token`` stands for (None: no such token). Every hash is compared,
        each in constant time, so the time taken says nothing about which one matched."""
        digest = hashlib.sha256(token.encode()).digest()
        found: Identity | None = None
        if self._shared is not None and hmac.compare_digest(digest, self._shared):
            found = Identity(self._shared_name, SHARED)
        for name, value in self._people:
            if hmac.compare_digest(digest, value) and found is None:
                found = Identity(name, PERSON)
        return found
