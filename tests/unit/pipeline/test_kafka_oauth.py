"""OAUTHBEARER: loading the token provider, and the built-in unsecured JWT provider.

Kafka 4.1's unsecured validator decodes the token's parts with the plain Base64
alphabet (``java.util.Base64.getDecoder()``), so every token must read the same under
Base64 and Base64url. Checked once by hand against ``OAuthBearerUnsecuredJws`` from
kafka-clients 4.1.1: ``sub`` ``a?>~`` encoded naively is refused ("malformed Base64 URL
encoded value"), the provider's token is accepted.
"""

from __future__ import annotations

import base64
import json
import os

import pytest
from aiokafka.abc import AbstractTokenProvider

from pipeline import kafka_oauth, settings
from pipeline.kafka_oauth import UnsecuredJwtProvider, unsecured_jws


@pytest.fixture(autouse=True)
def _no_kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("KAFKA_"):
            monkeypatch.delenv(name)


def _decode(part: str, alphabet: str) -> dict[str, object]:
    padded = part + "=" * (-len(part) % 4)
    raw = base64.b64decode(padded) if alphabet == "std" else base64.urlsafe_b64decode(padded)
    return json.loads(raw)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "subject",
    ["ingest", "User:ingest_x-1", "a?>~", "x_y_z?", "ünïcode", "emoji-\U0001f600", "~~~???"],
)
def test_tokens_read_alike_in_both_alphabets(subject: str) -> None:
    provider = UnsecuredJwtProvider(subject, lifetime_seconds=600)
    now = 1_800_000_000
    for step in range(0, 400 * 37, 37):  # many timestamps: different digits, same rules
        token = provider.mint(now + step)
        header, claims, signature = token.split(".")
        assert signature == ""
        assert "-" not in header + claims and "_" not in header + claims
        for alphabet in ("std", "url"):
            assert _decode(header, alphabet) == {"alg": "none"}
            assert _decode(claims, alphabet) == {
                "sub": subject,
                "iat": now + step,
                "exp": now + step + 600,
            }


def test_a_naive_encoding_would_be_refused() -> None:
    """The case the portable encoding exists for: plain Base64url of ``a?>~`` has '-'."""
    naive = base64.urlsafe_b64encode(json.dumps({"sub": "a?>~", "exp": 4102444800}).encode())
    assert b"-" in naive
    assert "-" not in unsecured_jws({"sub": "a?>~", "exp": 4102444800})


async def test_token_is_reused_until_a_minute_before_expiry(monkeypatch) -> None:
    clock = [1_800_000_000.0]
    monkeypatch.setattr(kafka_oauth.time, "time", lambda: clock[0])
    provider = UnsecuredJwtProvider("ingest", lifetime_seconds=3600)
    first = await provider.token()
    clock[0] += 3600 - 61
    assert await provider.token() == first
    clock[0] += 2
    assert await provider.token() != first


def test_empty_subject_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        UnsecuredJwtProvider(" ")


class _Provider(AbstractTokenProvider):
    async def token(self) -> str:
        return "t"


INSTANCE = _Provider()


def make_provider() -> _Provider:
    return _Provider()


def not_a_provider() -> object:
    return object()


def _kafka(spec: str) -> settings.KafkaSettings:
    return settings.KafkaSettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=spec,
        sasl_oauth_subject="ingest",
    )


def test_provider_forms() -> None:
    here = __name__
    assert _kafka(f"{here}:INSTANCE").client_kwargs()["sasl_oauth_token_provider"] is INSTANCE
    made = _kafka(f"{here}:make_provider").client_kwargs()["sasl_oauth_token_provider"]
    assert isinstance(made, _Provider) and made is not INSTANCE
    made = _kafka(f"{here}:_Provider").client_kwargs()["sasl_oauth_token_provider"]
    assert isinstance(made, _Provider)
    built_in = _kafka("pipeline.kafka_oauth:UnsecuredJwtProvider").client_kwargs()
    assert isinstance(built_in["sasl_oauth_token_provider"], UnsecuredJwtProvider)


def test_a_factory_giving_no_provider_fails_naming_the_variable() -> None:
    # Plain factories are only called when a client is built: the error names the
    # variable there too.
    cfg = _kafka(f"{__name__}:not_a_provider")
    with pytest.raises(
        settings.ConfigError,
        match=r"^invalid setting KAFKA_SASL_OAUTH_TOKEN_PROVIDER: gave a object",
    ):
        cfg.client_kwargs()


def test_bad_spec_forms() -> None:
    for spec in ("", "module_only", ":attr", "pipeline.kafka_oauth:"):
        with pytest.raises(ValueError, match="module:attr"):
            kafka_oauth.resolve(spec)


class NeedsAVariable(AbstractTokenProvider):
    @classmethod
    def from_settings(cls, cfg: settings.KafkaSettings) -> NeedsAVariable:
        raise KeyError("AWS_REGION")

    async def token(self) -> str:
        return "t"


def test_a_provider_failing_at_start_up_is_one_line(monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "OAUTHBEARER")
    monkeypatch.setenv("KAFKA_SASL_OAUTH_TOKEN_PROVIDER", f"{__name__}:NeedsAVariable")
    with pytest.raises(settings.ConfigError) as info:
        settings.load_settings()
    assert str(info.value) == (
        "invalid setting KAFKA_SASL_OAUTH_TOKEN_PROVIDER: KeyError: 'AWS_REGION'"
    )
