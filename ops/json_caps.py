"""Caps on the JSON an operator sends that travels on to Temporal and PostgreSQL: a fix's
``patch`` and a resubmission's ``payload``.

Both end up in a workflow update's argument, the task's history and a ``jsonb`` column,
so they stay far below Temporal's 2 MB blob limit (a patched payload is the old payload
plus the patch), hold no NUL (``jsonb`` cannot store one: a 500 from PostgreSQL), and
nest no deeper than :data:`MAX_DEPTH` (orjson writes at most 254 levels).
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import AfterValidator

MAX_DEPTH = 32
MAX_BYTES = 256 * 1024


def json_problem(value: Any) -> str | None:
    """Why ``value`` may not be sent on (None: it may)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if "\x00" in key:
                        return "holds a NUL character (U+0000)"
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str) and "\x00" in item:
            return "holds a NUL character (U+0000)"
    size = len(orjson.dumps(value))
    if size > MAX_BYTES:
        return f"{size} bytes as JSON, more than {MAX_BYTES}"
    return None


def _check(value: Any) -> Any:
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


CappedJson = Annotated[Any, AfterValidator(_check)]
CappedObject = Annotated[dict[str, Any], AfterValidator(_check)]
