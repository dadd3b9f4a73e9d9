"""How a task's handler activity is retried and timed, read from the task's ``config``.

Reserved ``config`` keys (every other key is the handler's own):

* ``max_attempts`` (default 5): handler attempts before the task is marked failed.
* ``timeout_seconds`` (default 300): one attempt's start-to-close timeout.
* ``heartbeat_timeout_seconds`` (default 60): the worker heartbeats while a handler
  runs, so a crashed worker's attempt is retried after this, not after the timeout.
* ``retry_initial_seconds`` (default 1) and ``retry_max_interval_seconds`` (default 60):
  exponential backoff (coefficient 2) between attempts.

``plan_tasks`` validates them, so a bad value fails the plan naming the key instead
of failing inside the workflow. Pure and deterministic: workflows import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.errors import TaskConfigError

_DEFAULTS: dict[str, float] = {
    "max_attempts": 5,
    "timeout_seconds": 300.0,
    "heartbeat_timeout_seconds": 60.0,
    "retry_initial_seconds": 1.0,
    "retry_max_interval_seconds": 60.0,
}


@dataclass(frozen=True)
class HandlerOptions:
    max_attempts: int
    timeout_seconds: float
    heartbeat_timeout_seconds: float
    retry_initial_seconds: float
    retry_max_interval_seconds: float


def _number(config: Mapping[str, Any], key: str) -> float:
    value = config.get(key, _DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskConfigError(f"config.{key} must be a positive number, got {value!r}")
    return float(value)


def handler_options(config: Mapping[str, Any]) -> HandlerOptions:
    """Options from a task config; :class:`TaskConfigError` names the bad key."""
    max_attempts = _number(config, "max_attempts")
    if max_attempts != int(max_attempts):
        raise TaskConfigError(f"config.max_attempts must be an integer, got {max_attempts!r}")
    opts = HandlerOptions(
        max_attempts=int(max_attempts),
        timeout_seconds=_number(config, "timeout_seconds"),
        heartbeat_timeout_seconds=_number(config, "heartbeat_timeout_seconds"),
        retry_initial_seconds=_number(config, "retry_initial_seconds"),
        retry_max_interval_seconds=_number(config, "retry_max_interval_seconds"),
    )
    if opts.retry_max_interval_seconds < opts.retry_initial_seconds:
        raise TaskConfigError("config.retry_max_interval_seconds must be >= retry_initial_seconds")
    return opts
