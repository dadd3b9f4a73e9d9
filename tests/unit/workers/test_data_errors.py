"""What the worker never retries (workers.data_errors), and how keys and errors are stored
(workers.store ``stored_key``, ``error_text``)."""

from __future__ import annotations

import hashlib
from typing import Any

import asyncpg
import pytest
from asyncpg import exceptions as pg
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from workers.data_errors import (
    CONFLICT_ATTEMPTS,
    MAX_MESSAGE,
    DataErrorInterceptor,
    postgres_error,
    refusal,
)
from workers.store import KEY_MAX_BYTES, error_text, stored_key


@pytest.mark.parametrize(
    ("error", "state"),
    [
        (pg.UntranslatableCharacterError, "22P05"),  # a NUL in jsonb
        (pg.CharacterNotInRepertoireError, "22021"),  # a NUL in text
        (pg.NumericValueOutOfRangeError, "22003"),
        (pg.ProgramLimitExceededError, "54000"),  # a btree row over 2,704 bytes
        (pg.CheckViolationError, "23514"),
        (pg.NotNullViolationError, "23502"),
        (pg.ForeignKeyViolationError, "23503"),
    ],
)
def test_data_errors_are_refused_naming_class_and_sqlstate(error: type, state: str) -> None:
    refused = refusal(error("it cannot be stored"))
    assert refused is not None and refused.non_retryable
    assert refused.type == error.__name__
    assert refused.message.startswith(f"SQLSTATE {state} (")
    assert "it cannot be stored" in refused.message


@pytest.mark.parametrize(
    "error",
    [
        pg.SerializationError,  # 40001
        pg.DeadlockDetectedError,  # 40P01
        pg.ConnectionFailureError,  # 08006
        pg.AdminShutdownError,  # 57P01
        pg.TooManyConnectionsError,  # 53300
        pg.QueryCanceledError,  # 57014
        pg.UndefinedTableError,  # 42P01: a schema behind the code; a migration fixes it
    ],
)
def test_transient_and_other_errors_are_left_to_the_retry_policy(error: type) -> None:
    assert refusal(error("x")) is None
    assert refusal(error("x"), attempt=100) is None


@pytest.mark.parametrize("error", [pg.UniqueViolationError, pg.ExclusionViolationError])
def test_a_conflict_is_retried_a_few_times_then_refused(error: type) -> None:
    for attempt in range(1, CONFLICT_ATTEMPTS):
        assert refusal(error("x"), attempt) is None, attempt
    refused = refusal(error("x"), CONFLICT_ATTEMPTS)
    assert refused is not None and refused.non_retryable


def test_the_message_is_bounded_and_has_no_nul() -> None:
    err = pg.UniqueViolationError("duplicate key")
    err.detail = "Key (idempotency_key)=(" + "k\x00" * 2000 + ") already exists."  # type: ignore[attr-defined]
    refused = refusal(err, CONFLICT_ATTEMPTS)
    assert refused is not None
    assert len(refused.message) <= MAX_MESSAGE and "\x00" not in refused.message
    assert refused.message.endswith("...")


def test_the_postgres_error_is_found_through_explicit_causes() -> None:
    inner = pg.UntranslatableCharacterError("nul")
    try:
        try:
            raise inner
        except asyncpg.PostgresError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert postgres_error(outer) is inner
    assert postgres_error(RuntimeError("plain")) is None


class _Raises(ActivityInboundInterceptor):
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        raise self.exc


async def _through_interceptor(exc: BaseException) -> BaseException:
    inbound = DataErrorInterceptor().intercept_activity(_Raises(exc))

    async def run() -> None:
        await inbound.execute_activity(
            ExecuteActivityInput(fn=run, args=[], executor=None, headers={})
        )

    with pytest.raises(BaseException) as info:
        await ActivityEnvironment().run(run)
    return info.value


async def test_the_interceptor_refuses_a_data_error_without_chaining_it() -> None:
    got = await _through_interceptor(pg.ProgramLimitExceededError("index row size 3016"))
    assert isinstance(got, ApplicationError) and got.non_retryable
    assert got.type == "ProgramLimitExceededError"
    assert got.message.startswith("SQLSTATE 54000 (program limit exceeded)")
    assert got.__cause__ is None  # describe() reports this refusal, not asyncpg's message


@pytest.mark.parametrize(
    "exc",
    [RuntimeError("transient"), pg.SerializationError("retry me"), ApplicationError("own")],
)
async def test_the_interceptor_passes_anything_else_through(exc: BaseException) -> None:
    assert await _through_interceptor(exc) is exc


def test_a_key_is_stored_as_it_is_up_to_the_cap() -> None:
    assert stored_key(None) is None
    assert stored_key("order-1") == "order-1"
    at_cap = "k" * KEY_MAX_BYTES
    assert stored_key(at_cap) == at_cap
    two_byte = "é" * (KEY_MAX_BYTES // 2)  # the cap counts UTF-8 bytes
    assert stored_key(two_byte) == two_byte


@pytest.mark.parametrize(
    "key",
    ["k" * (KEY_MAX_BYTES + 1), "é" * (KEY_MAX_BYTES // 2 + 1), "a\x00b", "x" * 3000],
)
def test_a_long_key_or_one_with_a_nul_is_stored_as_its_sha256(key: str) -> None:
    digest = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    assert stored_key(key) == digest
    assert stored_key(key) == stored_key(key[:])  # the same key, the same stored form


def test_a_key_with_a_lone_surrogate_is_digested_not_raised() -> None:
    key = "bad\ud800"
    assert stored_key(key) == (
        "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    )


def test_error_text_can_always_be_stored() -> None:
    assert error_text(None) is None
    assert error_text("plain") == "plain"
    assert error_text("a\x00b") == "a\\u0000b"
    assert error_text("lone \ud800").encode("utf-8")  # type: ignore[union-attr]
