"""What the session fixtures describe: the running stack, and one test's topics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stack:
    kafka: str
    temporal: str
    namespace: str  # the session's own Temporal namespace (tests.support.namespaces)
    admin_db_url: str  # a database on the server we may CREATE DATABASE from
    template_db: str


@dataclass(frozen=True)
class Topics:
    raw: str
    events: str
    dlq: str
    out: str  # where `emit` tasks publish
