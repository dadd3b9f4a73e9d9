"""Idempotency-key templates: ``"{data.message_id}"`` rendered over the trigger context.

A template is literal text with ``{dotted.path}`` fields; ``{{`` and ``}}`` are
literal braces. A path walks dicts by key and lists by integer index. Strings
and numbers render as ``str()``; dicts and lists as compact JSON with sorted keys
(so the same content always renders the same key).

A field that is missing or null is an error, not an empty string: an empty
field would make unrelated events share a key (and be suppressed as duplicates),
or silently drop the dedupe the author asked for. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from schemas.errors import IngestError

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class TemplateError(IngestError, ValueError):
    """The template is malformed or names a field the context does not have."""


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (``data.items.0.id``); ``KeyError`` if absent."""
    value: Any = context
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            try:
                value = value[int(part)]
            except IndexError:
                raise KeyError(path) from None
        else:
            raise KeyError(path)
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def render(template: str, context: Mapping[str, Any]) -> str:
    """Render ``template``; raises :class:`TemplateError` naming the bad field."""
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(template):
        out.append(template[pos : m.start()])
        pos = m.end()
        token = m.group(0)
        if token in ("{{", "}}"):
            out.append(token[0])
            continue
        path = m.group(1)
        if path is None:
            raise TemplateError(f"unbalanced {token!r} at position {m.start()} in {template!r}")
        path = path.strip()
        if not path:
            raise TemplateError(f"empty field {{}} in {template!r}")
        try:
            value = lookup(context, path)
        except KeyError:
            raise TemplateError(f"field {path!r} is not in the trigger context") from None
        if value is None:
            raise TemplateError(f"field {path!r} is null in the trigger context")
        out.append(_text(value))
    out.append(template[pos:])
    rendered = "".join(out)
    if not rendered:
        raise TemplateError(f"template {template!r} renders an empty key")
    return rendered
