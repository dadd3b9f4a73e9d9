"""JSON *text* with the things a JSON library would never write.

A generated document is a small tree (:class:`Str`, :class:`Raw`, :class:`Arr`,
:class:`Obj`) rendered to bytes by :func:`render`. The tree, not a Python ``dict``,
so that it can hold what a producer's bytes may hold and ``orjson.dumps`` cannot
write: duplicate keys (an :class:`Obj` is a list of pairs), numbers out of every
range (``1e999``, 30-digit integers: :class:`Raw` tokens), lone UTF-16 surrogates
and raw control bytes spliced into a string (:attr:`Str.inject`), non-ASCII
escaped as ``\\uXXXX`` or written as UTF-8, and nesting deeper than any writer goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Str:
    """A JSON string. ``inject``: (index into ``text``, raw text spliced in there
    unescaped), e.g. ``(3, "\\\\ud800")`` for a lone surrogate escape or ``(0, "\\x00")``
    for a raw NUL byte (not valid JSON)."""

    text: str
    ascii: bool = False
    inject: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Raw:
    """A token written as is: ``null``, ``true``, ``1e999``, a nesting of 300 brackets."""

    text: str


@dataclass
class Arr:
    items: list[Node]


@dataclass
class Obj:
    """An object as a list of pairs: the same key may come twice."""

    pairs: list[tuple[Str, Node]]


Node = Str | Raw | Arr | Obj


def _escape(text: str, ascii_only: bool) -> str:
    out: list[str] = []
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\u{o:04x}"))
        elif ascii_only and o > 0x7E:
            if o > 0xFFFF:
                o -= 0x10000
                out.append(f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}")
            else:
                out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _string(s: Str) -> str:
    if not s.inject:
        return f'"{_escape(s.text, s.ascii)}"'
    parts, pos = [], 0
    for at, raw in sorted(s.inject, key=lambda i: i[0]):
        at = max(0, min(at, len(s.text)))
        parts += [_escape(s.text[pos:at], s.ascii), raw]
        pos = at
    parts.append(_escape(s.text[pos:], s.ascii))
    return '"' + "".join(parts) + '"'


def to_text(node: Node, sep: str = ",") -> str:
    if isinstance(node, Str):
        return _string(node)
    if isinstance(node, Raw):
        return node.text
    if isinstance(node, Arr):
        return "[" + sep.join(to_text(i, sep) for i in node.items) + "]"
    return "{" + sep.join(f"{_string(k)}:{to_text(v, sep)}" for k, v in node.pairs) + "}"


def render(node: Node, sep: str = ",") -> bytes:
    """UTF-8 bytes of ``node``; ``surrogatepass`` so a raw surrogate injected on
    purpose is written as its (invalid) UTF-8 bytes instead of failing here."""
    return to_text(node, sep).encode("utf-8", "surrogatepass")


def strings(node: Node) -> Iterator[Str]:
    """Every string of ``node``, keys included, in document order."""
    if isinstance(node, Str):
        yield node
    elif isinstance(node, Arr):
        for item in node.items:
            yield from strings(item)
    elif isinstance(node, Obj):
        for key, value in node.pairs:
            yield key
            yield from strings(value)


def get(obj: Obj, key: str) -> Node | None:
    """The last value of ``key`` in ``obj`` (what most parsers keep), or None."""
    found = None
    for k, v in obj.pairs:
        if k.text == key and not k.inject:
            found = v
    return found
