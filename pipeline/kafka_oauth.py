"""SASL/OAUTHBEARER for Kafka: the pluggable token provider, and a built-in one for tests.

``KAFKA_SASL_MECHANISM=OAUTHBEARER`` needs ``KAFKA_SASL_OAUTH_TOKEN_PROVIDER=module:attr``,
imported as task handlers are (``workers/handlers/registry.py``: ``module:attr``). The
attribute is one of:

* an instance of aiokafka's :class:`~aiokafka.abc.AbstractTokenProvider`, used as is;
* a class or factory with a ``from_settings(cfg)`` attribute: called with the
  :class:`~pipeline.settings.KafkaSettings`, once at start-up to check the settings
  (a bad one fails there, naming the variable) and once per client built;
* any other callable: called with no argument, once per client built.

What it returns must be an ``AbstractTokenProvider`` (aiokafka checks ``isinstance``):
an ``async def token()`` returning the bearer token, reused until it nears expiry, and
optionally ``extensions()`` (SASL extensions, e.g. Confluent Cloud's
``logicalCluster``/``identityPoolId``). docs/security.md has working providers for
Amazon MSK IAM and Confluent Cloud OAuth; neither library is a dependency here.

:class:`UnsecuredJwtProvider` (``pipeline.kafka_oauth:UnsecuredJwtProvider``) mints
unsigned JWTs (``alg: none``) for the principal ``KAFKA_SASL_OAUTH_SUBJECT``: what
Kafka's own ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts, the broker's
default for an OAUTHBEARER listener without a configured validator. Tests and local
stacks only: anyone can mint such a token for any principal.
"""

from __future__ import annotations

import base64
import importlib
import itertools
import json
import time
from typing import Any

from aiokafka.abc import AbstractTokenProvider

from schemas.errors import IngestError

# The KafkaSettings (pipeline.settings imports this module, not the other way round:
# errors here are ValueErrors, which the settings turn into one line naming ``env``).
KafkaSettings = Any

PROVIDER_ENV = "KAFKA_SASL_OAUTH_TOKEN_PROVIDER"
SUBJECT_ENV = "KAFKA_SASL_OAUTH_SUBJECT"


class SettingProblem(IngestError, ValueError):
    """A provider refused the settings; ``env`` names the variable to fix."""

    def __init__(self, env: str, message: str) -> None:
        super().__init__(message)
        self.env = env


def resolve(spec: str) -> Any:
    """The object ``module:attr`` names; ``ValueError`` saying what is wrong."""
    mod_name, sep, attr = spec.strip().partition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(
            f"{spec!r} is not module:attr (e.g. pipeline.kafka_oauth:UnsecuredJwtProvider)"
        )
    try:
        module = importlib.import_module(mod_name)
    except Exception as exc:
        raise ValueError(f"cannot import {mod_name}: {type(exc).__name__}: {exc}") from None
    target = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{mod_name} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


def build_provider(target: Any, cfg: KafkaSettings) -> AbstractTokenProvider:
    """The token provider ``target`` (what :func:`resolve` returned) stands for."""
    if isinstance(target, AbstractTokenProvider):
        return target
    factory = getattr(target, "from_settings", None)
    made = factory(cfg) if callable(factory) else target()
    if not isinstance(made, AbstractTokenProvider):
        raise ValueError(f"gave a {type(made).__name__}, not an aiokafka.abc.AbstractTokenProvider")
    return made


def check(spec: str, cfg: KafkaSettings) -> None:
    """At start-up: ``spec`` imports, and a provider with ``from_settings`` accepts ``cfg``.

    Raises ``ValueError`` (the settings validator names the variable)."""
    target = resolve(spec)
    if isinstance(target, AbstractTokenProvider) or callable(
        getattr(target, "from_settings", None)
    ):
        try:
            build_provider(target, cfg)
        except ValueError:
            raise
        except Exception as exc:  # a provider's own error, e.g. a variable it lacks
            raise ValueError(f"{type(exc).__name__}: {exc}") from None
    elif not callable(target):
        raise ValueError(f"{spec} is neither a token provider nor callable")


def load_token_provider(spec: str, cfg: KafkaSettings) -> AbstractTokenProvider:
    """A provider for one client, from ``KAFKA_SASL_OAUTH_TOKEN_PROVIDER``; ``ValueError``
    (a :class:`SettingProblem` when it names another variable) if it cannot be had."""
    try:
        return build_provider(resolve(spec), cfg)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


# --- the built-in unsecured provider ------------------------------------------------------

_HEADER = {"alg": "none"}
_REFRESH_BEFORE_S = 60  # a new token this long before the current one expires


def _b64(raw: bytes) -> bytes:
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def _clean(encoded: bytes) -> bool:
    # Base64url and plain Base64 differ only in characters 62 and 63 ('-_' versus '+/').
    # Without either, the text decodes the same with both alphabets.
    return b"-" not in encoded and b"_" not in encoded


def _escaped(value: Any) -> str:
    """``value`` as JSON, every character of a string but ASCII letters and digits as a
    ``\\uXXXX`` escape: such text has no run of five 1-bits, so no 6-bit group of its
    Base64 is 62 or 63, whatever the alignment."""
    if not isinstance(value, str):
        return json.dumps(value)
    units = value.encode("utf-16-be")
    out = []
    for i in range(0, len(units), 2):
        code = int.from_bytes(units[i : i + 2], "big")
        char = chr(code)
        out.append(char if char.isascii() and char.isalnum() else f"\\u{code:04x}")
    return '"' + "".join(out) + '"'


def _portable_json(members: list[tuple[str, Any]]) -> bytes:
    """The Base64url of a JSON object with ``members``, free of '-' and '_'.

    Kafka 4.1's unsecured validator (``OAuthBearerUnsecuredJws.toMap``) decodes the
    header and claims with ``java.util.Base64.getDecoder()``, the plain alphabet, not
    the URL-safe one RFC 7515 prescribes: a token whose Base64url holds '-' or '_' is
    refused ("malformed Base64 URL encoded value"), which happens with characters such
    as '?', '>', '~' or '_' in a subject, depending on where they fall. Blanks between
    members shift the 3-byte grouping until the encoding uses neither character; when
    no grouping works, strings go out with ``\\u`` escapes, which always works. Either
    way the token reads the same under both alphabets.
    """
    for dumps in (json.dumps, _escaped):
        pieces = [json.dumps(k) + ":" + dumps(v) for k, v in members]
        for pads in itertools.product(range(3), repeat=len(pieces) + 1):
            text = "{" + " " * pads[0]
            text += ",".join(p + " " * n for p, n in zip(pieces, pads[1:], strict=True)) + "}"
            encoded = _b64(text.encode())
            if _clean(encoded):
                return encoded
    raise ValueError("cannot encode these claims so that Base64 and Base64url read them alike")


def unsecured_jws(claims: dict[str, Any]) -> str:
    """An unsecured JWS (``alg: none``, empty signature) carrying ``claims``."""
    header = _portable_json(list(_HEADER.items()))
    body = _portable_json(list(claims.items()))
    return f"{header.decode()}.{body.decode()}."


class UnsecuredJwtProvider(AbstractTokenProvider):
    """Unsigned JWTs for ``subject`` (claims ``sub``, ``iat``, ``exp``; ``scope`` if given).

    For brokers whose OAUTHBEARER listener runs Kafka's unsecured validator: tests and
    local stacks, never production. A token lives ``lifetime_seconds`` and is reused
    until a minute before it expires.
    """

    def __init__(
        self, subject: str, lifetime_seconds: int = 3600, scope: str | None = None
    ) -> None:
        if not subject or not subject.strip():
            raise ValueError("the subject is empty")
        self.subject = subject
        self.lifetime_seconds = lifetime_seconds
        self.scope = scope
        self._token: str | None = None
        self._expires = 0.0
        self.mint(time.time())  # an unencodable subject fails here, at start-up

    @classmethod
    def from_settings(cls, cfg: KafkaSettings) -> UnsecuredJwtProvider:
        if not cfg.sasl_oauth_subject:
            raise SettingProblem(
                SUBJECT_ENV,
                f"required by {PROVIDER_ENV}=pipeline.kafka_oauth:UnsecuredJwtProvider"
                " (the principal name, e.g. ingest)",
            )
        try:
            return cls(cfg.sasl_oauth_subject)
        except ValueError as exc:
            raise SettingProblem(SUBJECT_ENV, str(exc)) from None

    def mint(self, now: float) -> str:
        claims: dict[str, Any] = {
            "sub": self.subject,
            "iat": int(now),
            "exp": int(now) + self.lifetime_seconds,
        }
        if self.scope:
            claims["scope"] = self.scope
        self._token = unsecured_jws(claims)
        self._expires = claims["exp"]
        return self._token

    async def token(self) -> str:
        now = time.time()
        if self._token is None or now >= self._expires - _REFRESH_BEFORE_S:
            return self.mint(now)
        return self._token
