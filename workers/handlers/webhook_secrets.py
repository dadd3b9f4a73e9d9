"""Webhook credentials by reference, and webhook URLs fit to quote in an error.

A task's ``config`` travels in Temporal history (the plan marker, the child workflow's
input) and in the ``activities`` table. A credential written there is readable by anyone
who reads either. So a ``webhook`` task names its secrets instead, and the handler reads
them inside the activity, at call time (:func:`resolve_url`, :func:`resolve_headers`):

* ``headers_from_env: {"Authorization": "WEBHOOK_CRM_TOKEN"}``: the header's whole value
  is that environment variable of the worker. Only names starting with
  ``INGEST_WEBHOOK_SECRET_ENV_PREFIX`` (default ``WEBHOOK_``) may be named, so a
  definition cannot send ``DATABASE_URL`` or the codec keys to a URL of its choosing.
* ``headers_from_file: {"Authorization": "crm-token"}``: the value is that file's
  content (surrounding whitespace stripped, at most 64 KiB), a path relative to
  ``INGEST_WEBHOOK_SECRETS_DIR`` (default ``/run/secrets``) that must stay inside it.
* ``url_from_env`` / ``url_from_file``: the whole URL, the same way, for receivers whose
  URL is the credential (a token in the path or the query). Give exactly one of ``url``,
  ``url_from_env`` and ``url_from_file``.

A missing variable or file, or a value no HTTP header may carry, fails the task for
good (``PermanentTaskError``) naming the header and the variable or file, never the
value. :func:`literal_secret_headers` lists literal ``headers`` whose name looks like a
credential (the handler logs a warning once per activity and header);
:func:`webhook_config_problems` is the whole check, for a definition being applied
(``ingest activities apply`` refuses what it finds); :func:`webhook_config_warnings`
what it only warns about.

Every error the handler raises quotes the URL through :func:`redact_url` (userinfo,
query values and fragment hidden; the path too when the URL came by reference), and
passes any other text through :class:`Scrubber`, which removes the URL's secret parts
and the resolved header values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pipeline.secret_files import UnreadableFile, read_capped_text
from workers.handlers.errors import PermanentTaskError

MAX_SECRET_FILE_BYTES = 64 << 10
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # printable ASCII: no CR, LF or other controls
# Header names that carry a credential, and words that make a name look like one.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"}
)
_SECRET_WORDS = ("token", "secret", "password", "passwd", "apikey", "api-key", "api_key",
                 "signature", "credential", "session", "private")  # fmt: skip
_URL_KEYS = ("url", "url_from_env", "url_from_file")


@dataclass(frozen=True)
class SecretSource:
    """Where references resolve: the worker's environment (names under ``env_prefix``)
    and files under ``secrets_dir``. ``environ`` None means ``os.environ`` at call time."""

    env_prefix: str = "WEBHOOK_"
    secrets_dir: Path = Path("/run/secrets")
    environ: Mapping[str, str] | None = field(default=None, repr=False)

    def env(self, name: object, what: str) -> str:
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise PermanentTaskError(f"webhook: {what} must name an environment variable")
        if not name.startswith(self.env_prefix):
            raise PermanentTaskError(
                f"webhook: {what} names {name}, which does not start with "
                f"INGEST_WEBHOOK_SECRET_ENV_PREFIX={self.env_prefix!r}"
            )
        value = (os.environ if self.environ is None else self.environ).get(name)
        if value is None or not value.strip():
            raise PermanentTaskError(f"webhook: {what}: {name} is not set in the worker")
        return value.strip()

    def file(self, name: object, what: str) -> str:
        if not isinstance(name, str) or not name.strip():
            raise PermanentTaskError(f"webhook: {what} must name a file")
        base = self.secrets_dir.resolve()
        path = (base / name).resolve()
        if not path.is_relative_to(base) or path == base:
            raise PermanentTaskError(
                f"webhook: {what} names {name!r}, outside INGEST_WEBHOOK_SECRETS_DIR={base}"
            )
        try:
            value = read_capped_text(path, MAX_SECRET_FILE_BYTES).strip()
        except UnreadableFile as exc:
            raise PermanentTaskError(f"webhook: {what}: {exc}") from None
        if not value:
            raise PermanentTaskError(f"webhook: {what}: {path} is empty")
        return value


def resolve_url(config: Mapping[str, Any], source: SecretSource) -> tuple[str, bool]:
    """(the URL, whether it came by reference); ``PermanentTaskError`` if not one http(s) URL."""
    given = [k for k in _URL_KEYS if config.get(k) is not None]
    if len(given) != 1:
        raise PermanentTaskError(
            "webhook: give exactly one of config.url, config.url_from_env, config.url_from_file"
        )
    (key,) = given
    if key == "url":
        url, by_ref = config["url"], False
    elif key == "url_from_env":
        url, by_ref = source.env(config[key], "config.url_from_env"), True
    else:
        url, by_ref = source.file(config[key], "config.url_from_file"), True
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        shown = f"{urlsplit(url).scheme or 'no'} scheme" if isinstance(url, str) else type(url)
        raise PermanentTaskError(f"webhook: config.{key} must give an http(s) URL, got {shown}")
    return url, by_ref


def resolve_headers(
    config: Mapping[str, Any], source: SecretSource
) -> tuple[dict[str, str], list[str]]:
    """(the request's headers from ``headers``, ``headers_from_env`` and
    ``headers_from_file``; the values that came by reference, for :class:`Scrubber`)."""
    out: dict[str, str] = {}
    secrets: list[str] = []
    seen: set[str] = set()
    for key in ("headers", "headers_from_env", "headers_from_file"):
        block = config.get(key)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise PermanentTaskError(f"webhook: config.{key} must be an object")
        for name, ref in block.items():
            what = f"config.{key}[{name!r}]"
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise PermanentTaskError(f"webhook: config.{key} has a bad header name")
            if name.lower() in seen:
                raise PermanentTaskError(f"webhook: header {name!r} is given twice in config")
            seen.add(name.lower())
            if key == "headers":
                value = str(ref)
            else:
                value = (
                    source.env(ref, what) if key == "headers_from_env" else source.file(ref, what)
                )
                secrets.append(value)
            if not _HEADER_VALUE.fullmatch(value):
                raise PermanentTaskError(
                    f"webhook: {what} holds a line break, a control or a non-ASCII character"
                )
            out[name] = value
    return out, secrets


def looks_secret(header: str) -> bool:
    """Whether a header of this name probably carries a credential."""
    low = header.lower()
    return low in SECRET_HEADERS or any(w in low for w in _SECRET_WORDS)


def literal_secret_headers(config: Mapping[str, Any]) -> list[str]:
    """The literal ``headers`` whose name looks like a credential: they belong in
    ``headers_from_env`` or ``headers_from_file``."""
    block = config.get("headers")
    if not isinstance(block, dict):
        return []
    return sorted(str(n) for n in block if looks_secret(str(n)))


def webhook_config_problems(config: Mapping[str, Any]) -> list[str]:
    """What is wrong with a webhook task's config, as far as it can be told without the
    worker's environment: the shape of the references, and literal credentials."""
    problems: list[str] = []
    given = [k for k in _URL_KEYS if config.get(k) is not None]
    if len(given) != 1:
        problems.append("give exactly one of url, url_from_env, url_from_file")
    elif given == ["url"]:
        url = config["url"]
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            problems.append("url must be an http(s) URL")
    for key in ("headers", "headers_from_env", "headers_from_file"):
        block = config.get(key)
        if block is not None and not isinstance(block, dict):
            problems.append(f"{key} must be an object")
    problems += [
        f"headers[{n!r}] looks like a credential written in the definition (it is stored in "
        "Temporal history and the activities table): use headers_from_env or headers_from_file"
        for n in literal_secret_headers(config)
    ]
    return problems


def webhook_config_warnings(config: Mapping[str, Any]) -> list[str]:
    """What may be a credential in a webhook task's URL (userinfo, a query): a warning,
    not a refusal, since most queries are not secrets."""
    url = config.get("url")
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if parts.username is None and not parts.query:
        return []
    return [
        f"url {redact_url(url)} carries userinfo or a query: if it holds a "
        "credential, use url_from_env or url_from_file"
    ]


def redact_url(url: str, *, keep_path: bool = True) -> str:
    """``url`` fit for an error or a log line: userinfo, every query value and the
    fragment replaced by ``***`` (query keys kept); with ``keep_path=False`` the path too."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return _redact_unparsed(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"***@{host}" if "@" in parts.netloc else host
    path = parts.path
    if not keep_path and path not in ("", "/"):
        path = "/***"
    query = "&".join(_redact_param(p) for p in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, path, query, "***" if parts.fragment else ""))


def _redact_param(param: str) -> str:
    key, sep, _ = param.partition("=")
    return f"{key[:64]}=***" if sep and key else "***"


def _redact_unparsed(url: str) -> str:
    head = re.sub(r"//[^/?#]*@", "//***@", url)
    cut = re.search(r"[?#]", head)
    return head[: cut.start()] + "?***" if cut else head


class Scrubber:
    """Takes a webhook URL's secret parts and the resolved header values out of a text (an
    exception's message, a response body); :attr:`shown` is the URL as errors quote it."""

    def __init__(self, url: str, secrets: list[str], *, by_reference: bool) -> None:
        self._url = url
        self.shown = redact_url(url, keep_path=not by_reference)
        parts: list[str] = [*secrets]
        try:
            split = urlsplit(url)
        except ValueError:
            split = None
        if split is not None:
            parts += [split.netloc.rpartition("@")[0], split.password or ""]
            parts += [split.query, split.fragment]
            parts += [p.partition("=")[2] for p in split.query.split("&")]
            if by_reference:
                parts.append(split.path)
        # Longest first, so a part inside another is never left half-replaced; parts
        # under 4 characters are no credential and would mangle the text.
        self._needles = sorted({p for p in parts if len(p) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        text = text.replace(self._url, self.shown)
        for needle in self._needles:
            text = text.replace(needle, "***")
        return text
