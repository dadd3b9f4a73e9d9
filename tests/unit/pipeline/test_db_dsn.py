"""PostgreSQL DSNs: redaction of every password form, no password on the command line,
and the start-up warning for a remote server reached without certificate checks."""

from __future__ import annotations

import argparse

import pytest

from app.flags import add_flags, overrides
from pipeline import db, settings

SECRET = "hunter2x"


@pytest.mark.parametrize(
    ("dsn", "safe"),
    [
        ("postgresql://u:hunter2x@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?password=hunter2x", "postgresql://u@h/db?password=***"),
        (
            "postgresql://u@h:5432/db?sslmode=verify-full&password=hunter2x&sslrootcert=/ca.pem",
            "postgresql://u@h:5432/db?sslmode=verify-full&password=***&sslrootcert=/ca.pem",
        ),
        (
            "postgresql://u@h/db?sslkey=/k.pem&sslpassword=hunter2x",
            "postgresql://u@h/db?sslkey=/k.pem&sslpassword=***",
        ),
        ("postgres://u:hunter2x@h1:5432,h2:5433/db", "postgres://u:***@h1:5432,h2:5433/db"),
        ("postgresql://u:hunter2x@h/db?PASSWORD=hunter2x", "postgresql://u:***@h/db?PASSWORD=***"),
        # keyword/value DSNs (libpq's other form, which asyncpg does not take but a
        # message might still quote)
        ("host=h user=u password=hunter2x dbname=db", "host=h user=u password=*** dbname=db"),
        ("host=h password='hunter2x and more' port=1", "host=h password=*** port=1"),
        ("host=h sslpassword = hunter2x", "host=h sslpassword = ***"),
        # nothing to hide
        ("postgresql://u@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require"),
    ],
)
def test_redact(dsn: str, safe: str) -> None:
    assert db.redact(dsn) == safe
    assert SECRET not in db.redact(dsn)


def test_the_reviewed_reproduction_is_redacted() -> None:
    # security review finding 15: this came back unchanged in Unreachable/SchemaBehind
    dsn = "postgresql://app@127.0.0.1:1/x?password=hunter2x"
    assert SECRET not in str(db.SchemaBehind(dsn, ["0001_initial"]))


@pytest.mark.parametrize(
    ("dsn", "has"),
    [
        ("postgresql://u:pw@h/db", True),
        ("postgresql://u@h/db?password=pw", True),
        ("postgresql://u@h/db?sslpassword=pw", True),
        ("host=h password=pw", True),
        ("postgresql://u@h/db", False),
        ("postgresql://u:@h/db", False),  # an empty password is none
        ("postgresql://u@h/db?sslmode=verify-full", False),
    ],
)
def test_has_password(dsn: str, has: bool) -> None:
    assert db.has_password(dsn) is has


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_flags(p, "database_url")
    return p.parse_args(list(argv))


def test_database_url_flag_with_a_password_is_refused() -> None:
    for dsn in ("postgresql://u:hunter2x@h/db", "postgresql://u@h/db?password=hunter2x"):
        with pytest.raises(settings.ConfigError) as info:
            overrides(_parse("--database-url", dsn), "database_url")
        message = str(info.value)
        assert "--database-url" in message and "DATABASE_URL" in message
        assert "PGPASSWORD" in message and ".pgpass" in message
        assert SECRET not in message


def test_database_url_flag_without_a_password_passes() -> None:
    dsn = "postgresql://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem"
    assert overrides(_parse("--database-url", dsn), "database_url") == {"database__url": dsn}
    assert overrides(_parse(), "database_url") == {"database__url": None}


def test_migrate_refuses_it_too() -> None:
    from app.commands import migrate

    args = argparse.Namespace(database_url="postgresql://u:hunter2x@h/db")
    with pytest.raises(settings.ConfigError, match="--database-url"):
        migrate._run(args)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@127.0.0.1:55432/db",
        "postgresql://u@localhost/db",
        "postgresql://u@[::1]:5432/db",
        "postgresql:///db?host=/var/run/postgresql",
        "postgresql://u@%2Fvar%2Frun%2Fpostgresql/db",
        "postgresql:///db",  # no host: a local socket
        "postgresql://u@db.example.com/db?sslmode=verify-full&sslrootcert=/ca.pem",
        "postgresql://u@db.example.com/db?sslmode=verify-ca&sslrootcert=/ca.pem",
    ],
)
def test_no_warning(dsn: str) -> None:
    assert db.tls_warning(dsn, {}) is None


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        ("postgresql://u@db.example.com/db", "no sslmode (asyncpg's default is prefer)"),
        ("postgresql://u@10.1.2.3:5432/db?sslmode=prefer", "sslmode=prefer"),
        ("postgresql://u@db.example.com/db?sslmode=require", "sslmode=require"),
        ("postgresql://u@db.example.com/db?sslmode=disable", "sslmode=disable"),
        ("postgresql://u@db.example.com/db?sslmode=allow", "sslmode=allow"),
        ("postgresql://u@127.0.0.1,db.example.com/db", "no sslmode"),
    ],
)
def test_warning_for_an_unverified_remote_server(dsn: str, said: str) -> None:
    line = db.tls_warning(dsn, {})
    assert line is not None and "\n" not in line
    assert said in line and "sslmode=verify-full&sslrootcert=" in line


def test_pgsslmode_counts_when_the_dsn_has_none() -> None:
    dsn = "postgresql://u@db.example.com/db"
    assert db.tls_warning(dsn, {"PGSSLMODE": "verify-full"}) is None
    assert db.tls_warning(dsn + "?sslmode=require", {"PGSSLMODE": "verify-full"}) is not None
    assert db.tls_warning("postgresql:///db", {"PGHOST": "db.example.com"}) is not None


def test_the_warning_never_quotes_a_password() -> None:
    line = db.tls_warning("postgresql://u:hunter2x@db.example.com/db?password=hunter2x", {})
    assert line is not None and SECRET not in line
