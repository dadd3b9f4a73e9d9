"""Hypothesis strategies for Kafka records a broker accepts and our pipeline must survive.

:func:`records` draws one :class:`FuzzRecord` of a given *kind*, then maybe adds odd
Kafka headers and a key; a batch has every kind in the proportion of
:data:`KIND_WEIGHTS` (:func:`apportion`, ``tests/fuzz/generate.py``). Most kinds are
events of the fuzz activities' types (``tests.fuzz.activities.TYPES``) with a
fuzzed ``data.k`` (the flow key) and ``data.p`` (the priority), so that they pass
ingress and reach the router's flow code and the worker.

Long strings are made by ``random.Random(seed)`` from a drawn seed, length and
alphabet: random characters (PostgreSQL compresses a repeated letter, which would
hide the ~2.7 KB btree limit), and no Hypothesis buffer spent on them.

``UNIQ`` in a drawn id is replaced after generation by a token unique to the record
(:mod:`tests.fuzz.generate`): Hypothesis cannot count records, and ids that collide
by accident would make two records share one run.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.activities import TYPES
from tests.fuzz.jsontext import Arr, Node, Obj, Raw, Str, render, strings

UNIQ = "~UNIQ~"
FUZZ_TYPES = sorted(TYPES.values())
BOM = b"\xef\xbb\xbf"


@dataclass
class FuzzRecord:
    """One record to produce on the raw topic, and how it was made (for the counts)."""

    kind: str
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    mods: tuple[str, ...] = ()


def _roll(draw: Any) -> int:
    """0..99, for choices with weights."""
    return int(draw(st.integers(0, 99)))


# --- leaves -------------------------------------------------------------------------

ALPHABETS = ("ascii", "bmp", "cjk", "astral", "any")
LENGTHS = (200, 511, 512, 513, 700, 1000, 2000, 2700, 3000, 5000, 20000)
HUGE = (
    "1e999", "-1e999", "1E+999", "1e-999", "1E400", "4.9e-325", "1.7976931348623157e309",
    "123456789012345678901234567890", "-123456789012345678901234567890",
    "18446744073709551615", "18446744073709551616", "-9223372036854775809",
    "9223372036854775807", "0.000000000000000000000000000001", "-0", "-0.0",
)  # fmt: skip


def long_text(seed: int, length: int, alphabet: str) -> str:
    """``length`` random characters of ``alphabet`` (no surrogates), from ``seed``."""
    rnd = random.Random(seed)
    if alphabet == "ascii":
        return "".join(rnd.choices(string.ascii_letters + string.digits, k=length))
    lo, hi = {"bmp": (0x20, 0xFFFD), "cjk": (0x4E00, 0x9FFF), "astral": (0x1F300, 0x1FAFF)}.get(
        alphabet, (0, 0x10FFFF)
    )
    out: list[str] = []
    while len(out) < length:
        c = rnd.randint(lo, hi)
        if not 0xD800 <= c <= 0xDFFF:
            out.append(chr(c))
    return "".join(out)


long_str = st.builds(
    lambda seed, n, a, asc: Str(long_text(seed, n, a), asc),
    st.integers(0, 2**32),
    st.sampled_from(LENGTHS),
    st.sampled_from(ALPHABETS),
    st.booleans(),
)
# Any Unicode but surrogates (controls and NUL included), escaped or raw UTF-8. Most
# strings leave out NUL (data) or every control character (ids): Hypothesis favours
# U+0000, and a NUL or a control in every record would stop nearly all at ingress.
# The NUL kind puts one in every position on purpose.
text_str = st.builds(Str, st.text(max_size=40), st.booleans())
data_text = st.text(st.characters(exclude_characters="\x00"), max_size=40)
id_text = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=40)
data_str = st.builds(Str, data_text, st.booleans())
id_str = st.builds(Str, id_text, st.booleans())
key_str = st.builds(Str, data_text.map(lambda t: t[:12]) | st.sampled_from(["k", "p", "id"]))
# Numbers orjson reads (every 64-bit integer, wider ones as floats, finite floats);
# 1e999 and friends are the huge_number kind's.
number = st.one_of(
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
).map(Raw)
leaf = st.one_of(st.sampled_from(["null", "true", "false"]).map(Raw), number, data_str)
json_any: st.SearchStrategy[Node] = st.recursive(
    leaf,
    lambda c: st.one_of(
        st.lists(c, max_size=4).map(Arr), st.lists(st.tuples(key_str, c), max_size=4).map(Obj)
    ),
    max_leaves=12,
)
DEPTHS = (200, 250, 251, 252, 253, 254, 255, 256, 300, 1000, 1022, 1023, 1024, 1025, 2000)


def nested(depth: int, style: str) -> Raw:
    """``depth`` levels of arrays, objects or both."""
    if style == "arr":
        return Raw("[" * depth + "]" * depth)
    if style == "obj":
        return Raw('{"a":' * depth + "1" + "}" * depth)
    half = depth // 2
    return Raw('[{"k":' * half + "0" + "}]" * half)


deep = st.builds(nested, st.sampled_from(DEPTHS), st.sampled_from(["arr", "obj", "mix"]))
SHARED_KEYS = ("a", "b", "c", "hot", "ключ", "🔑", "a b", " ", "0")


@st.composite
def flow_key(draw: Any) -> Node:
    """A value for ``data.k``: shared keys (limits and windows meet them), integers,
    every other JSON type, any Unicode, long random text."""
    roll = _roll(draw)
    if roll < 35:
        return Str(draw(st.sampled_from(SHARED_KEYS)), draw(st.booleans()))
    if roll < 45:
        return Raw(str(draw(st.integers(-3, 3))))
    if roll < 50:
        return draw(number | st.sampled_from(HUGE).map(Raw))
    if roll < 58:
        return Raw(draw(st.sampled_from(["true", "false", "null", "[]", "{}", '""', "[1]"])))
    if roll < 75:
        return Str(draw(id_text) + UNIQ, draw(st.booleans()))
    if roll < 80:
        return Str(draw(data_text) + UNIQ, draw(st.booleans()))  # controls: bad_flow_key
    if roll < 92:
        return draw(long_str)
    return draw(json_any)


@st.composite
def priority(draw: Any) -> Node:
    if _roll(draw) < 75:
        return Raw(str(draw(st.integers(1, 5))))
    return draw(st.sampled_from(["0", "6", "-1", '"3"', "3.0", "true", "null", "1e999"]).map(Raw))


@st.composite
def fuzz_data(draw: Any, key: Node | None = None) -> Obj:
    pairs: list[tuple[Str, Node]] = []
    if key is not None or _roll(draw) < 92:
        pairs.append((Str("k"), key if key is not None else draw(flow_key())))
    if _roll(draw) < 85:
        pairs.append((Str("p"), draw(priority())))
    pairs += draw(st.lists(st.tuples(key_str, json_any), max_size=3))
    return Obj(draw(st.permutations(pairs)))


@st.composite
def fuzz_type(draw: Any) -> Node:
    roll = _roll(draw)
    if roll < 90:
        return Str(draw(st.sampled_from(FUZZ_TYPES)), draw(st.booleans()))
    if roll < 97:
        return draw(id_str | text_str)
    return draw(long_str)


@st.composite
def event_id(draw: Any) -> Node | None:
    """Absent (ingress stamps one) or a unique, arbitrary, long, shared or non-string id."""
    roll = _roll(draw)
    if roll < 55:
        return None
    if roll < 75:
        return Str(UNIQ + draw(id_text.map(lambda t: t[:8])), draw(st.booleans()))
    if roll < 82:
        return draw(id_str)
    if roll < 85:
        return draw(text_str)
    if roll < 90:
        return draw(long_str)
    if roll < 95:
        return Str(draw(st.sampled_from(["dup-1", "dup-2", "dup-3"])))
    return draw(json_any)


# --- documents ------------------------------------------------------------------------

OUR_FIELDS = ("event_id", "type", "source", "time", "subject", "data", "extensions")


@st.composite
def envelope(
    draw: Any, over: Mapping[str, Node | None] | None = None, any_types: bool = False
) -> Obj:
    """Our envelope ``{"event_id"?, "type", "source"?, "time"?, "subject"?, "data",
    "extensions"?}``; ``over`` replaces fields; ``any_types``: fields of every JSON type."""
    over = over or {}
    fields: dict[str, Node | None] = {
        "type": draw(fuzz_type()),
        "event_id": draw(event_id()),
        "source": draw(id_str) if _roll(draw) < 50 else None,
        "time": Str("2026-01-02T03:04:05Z") if _roll(draw) < 30 else None,
        "subject": draw(id_str) if _roll(draw) < 20 else None,
        "data": draw(fuzz_data()) if _roll(draw) < 95 else draw(json_any),
        "extensions": (
            Obj(draw(st.lists(st.tuples(key_str, json_any), max_size=3)))
            if _roll(draw) < 15
            else None
        ),
    }
    if any_types:
        for name in draw(st.lists(st.sampled_from(OUR_FIELDS), min_size=1, max_size=3)):
            fields[name] = draw(json_any)
    fields.update(over)
    pairs = [(Str(k), v) for k, v in fields.items() if v is not None]
    if _roll(draw) < 10:  # a key the envelope does not know
        pairs += draw(st.lists(st.tuples(key_str, json_any), min_size=1, max_size=2))
    return Obj(draw(st.permutations(pairs)))


@st.composite
def ce_structured(draw: Any, over: Mapping[str, Node | None] | None = None) -> Obj:
    """CloudEvents structured mode, every attribute sometimes of another JSON type."""
    over = over or {}

    def attr(good: Node, pct: int = 85) -> Node | None:
        roll = _roll(draw)
        if roll < pct:
            return good
        return None if roll < pct + 5 else draw(json_any | long_str | text_str)

    spec = Str("1.0") if _roll(draw) < 88 else draw(
        st.sampled_from([Str("0.3"), Raw("1.0"), Raw("null"), Arr([Str("1.0")]), Str("")])
    )  # fmt: skip
    fields: dict[str, Node | None] = {
        "specversion": spec,
        "id": attr(Str(UNIQ + draw(id_text.map(lambda t: t[:6])), draw(st.booleans()))),
        "source": attr(Str(draw(st.sampled_from(["/fz", "urn:fz", "https://x/y"])))),
        "type": draw(fuzz_type()),
        "time": Str("2026-01-02T03:04:05Z") if _roll(draw) < 30 else None,
        "subject": draw(id_str) if _roll(draw) < 20 else None,
        "datacontenttype": Str("application/json") if _roll(draw) < 30 else None,
        "data": draw(fuzz_data()) if _roll(draw) < 90 else None,
        "data_base64": Str("eyJrIjoxfQ==") if _roll(draw) < 5 else None,
    }
    fields.update(over)
    pairs = [(Str(k), v) for k, v in fields.items() if v is not None]
    ext_names = st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True) | st.sampled_from(
        ["event_id", "extensions", "id", "data", "k"]
    )
    pairs += draw(st.lists(st.tuples(ext_names.map(Str), json_any), max_size=2))
    return Obj(draw(st.permutations(pairs)))


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


@st.composite
def ce_binary(draw: Any) -> tuple[bytes | None, list[tuple[str, bytes | None]]]:
    """CloudEvents Kafka binary mode: ``ce_*`` headers, the body is ``data``."""

    def hv(good: bytes, pct: int = 85) -> bytes | None:
        roll = _roll(draw)
        if roll < pct:
            return good
        if roll < pct + 4:
            return None  # the header left out
        return draw(
            st.binary(max_size=20)
            | st.text(max_size=20).map(_utf8)
            | long_str.map(lambda s: _utf8(s.text))
        )

    headers: list[tuple[str, bytes | None]] = []
    for name, good in (
        ("ce_specversion", b"1.0"),
        ("ce_id", _utf8(UNIQ + draw(id_text.map(lambda t: t[:6])))),
        ("ce_source", b"/fz/binary"),
        ("ce_type", _utf8(draw(st.sampled_from(FUZZ_TYPES)))),
    ):
        value = hv(good, 88 if name == "ce_specversion" else 85)
        if value is not None or _roll(draw) < 20:
            headers.append((name, value))
    if _roll(draw) < 30:
        headers.append(("ce_subject", _utf8(draw(id_text))))
    if _roll(draw) < 20:
        headers.append(("content-type", b"application/json"))
    if _roll(draw) < 20:
        name = "ce_" + draw(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True))
        headers.append((name, draw(st.binary(max_size=20))))
    roll = _roll(draw)
    body: bytes | None
    if roll < 75:
        body = render(draw(fuzz_data()))
    elif roll < 85:
        body = render(draw(json_any))
    elif roll < 95:
        body = draw(st.binary(max_size=100))
    else:
        body = None
    return body, headers


# --- kinds ------------------------------------------------------------------------------

Drawn = tuple[bytes | None, list[tuple[str, bytes | None]]]


def _sep(draw: Any) -> str:
    return str(draw(st.sampled_from([",", ",", ",", ", ", ",\n "])))


@st.composite
def k_envelope(draw: Any) -> Drawn:
    return render(draw(envelope()), _sep(draw)), []


@st.composite
def k_envelope_any(draw: Any) -> Drawn:
    return render(draw(envelope(any_types=True)), _sep(draw)), []


@st.composite
def k_ce_structured(draw: Any) -> Drawn:
    return render(draw(ce_structured()), _sep(draw)), []


@st.composite
def k_ce_binary(draw: Any) -> Drawn:
    return draw(ce_binary())  # type: ignore[no-any-return]


def _inject(draw: Any, doc: Node, choices: list[str]) -> None:
    """Splice one of ``choices`` into one string of ``doc`` (keys too): at its start,
    its end or a drawn index."""
    every = list(strings(doc))
    target = every[draw(st.integers(0, len(every) - 1))]
    at = draw(st.sampled_from(["start", "end", "mid"]))
    index = {"start": 0, "end": len(target.text)}.get(at)
    if index is None:
        index = draw(st.integers(0, len(target.text)))
    target.inject.append((index, draw(st.sampled_from(choices))))


@st.composite
def k_nul(draw: Any) -> Drawn:
    """A NUL in any position: any string (keys included) of our envelope or a structured
    CloudEvent, escaped (``\\u0000``, valid JSON) or raw (not); a binary-mode header or
    body; or a raw NUL byte between tokens."""
    where = draw(st.sampled_from(["envelope", "envelope", "ce_structured", "ce_binary", "bytes"]))
    if where == "ce_binary":
        body, headers = draw(ce_binary())
        if headers and _roll(draw) < 50:
            i = draw(st.integers(0, len(headers) - 1))
            name, value = headers[i]
            v = value or b""
            at = draw(st.integers(0, len(v)))
            headers[i] = (name, v[:at] + b"\x00" + v[at:])
        else:
            b = body or b""
            at = draw(st.integers(0, len(b)))
            body = b[:at] + draw(st.sampled_from([b"\x00", b'"\\u0000"'])) + b[at:]
        return body, headers
    doc = draw(ce_structured() if where == "ce_structured" else envelope())
    if where == "bytes":
        raw = render(doc)
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + b"\x00" + raw[at:], []
    _inject(draw, doc, ["\\u0000", "\\u0000", "\\u0000", "\x00"])
    return render(doc), []


@st.composite
def k_surrogate(draw: Any) -> Drawn:
    """Lone surrogate escapes (and a valid pair, and a raw surrogate: invalid UTF-8)."""
    doc = draw(envelope() | ce_structured())
    _inject(
        draw,
        doc,
        ["\\ud800", "\\udbff", "\\udc00", "\\udfff", "\\ud83d", "\\ud83d\\ude00", "\ud800"],
    )
    return render(doc), []


@st.composite
def k_deep(draw: Any) -> Drawn:
    """Nesting near and over orjson's 254 writable levels (and its 1024 readable)."""
    where = draw(st.sampled_from(["data", "data.k", "extensions", "ce_data"]))
    node = draw(deep)
    if where == "data":
        doc = draw(envelope(over={"data": node}))
    elif where == "data.k":
        doc = draw(envelope(over={"data": draw(fuzz_data(key=node))}))
    elif where == "extensions":
        doc = draw(envelope(over={"extensions": Obj([(Str("x"), node)])}))
    else:
        doc = draw(ce_structured(over={"data": node}))
    return render(doc), []


@st.composite
def k_huge_number(draw: Any) -> Drawn:
    """1e999, 30-digit integers and friends in the key, the priority, any field."""
    n = Raw(draw(st.sampled_from(HUGE)))
    where = draw(st.sampled_from(["data.k", "data.p", "data.x", "event_id", "time", "ce_id"]))
    if where == "data.k":
        doc = draw(envelope(over={"data": draw(fuzz_data(key=n))}))
    elif where in ("data.p", "data.x"):
        data = draw(fuzz_data())
        data.pairs.append((Str(where[-1]), n))
        doc = draw(envelope(over={"data": data}))
    elif where == "ce_id":
        doc = draw(ce_structured(over={"id": n}))
    else:
        doc = draw(envelope(over={where: n}))
    return render(doc), []


LONG_TARGETS = ("type", "event_id", "source", "subject", "time", "data.k", "data.x", "ce_id",
                "ce_source", "ext_value", "ce_header")  # fmt: skip


@st.composite
def k_long_string(draw: Any) -> Drawn:
    """Thousands of random characters in one field (ids, keys, attributes, headers)."""
    s = draw(long_str)
    where = draw(st.sampled_from(LONG_TARGETS))
    if where == "data.k":
        doc: Node = draw(envelope(over={"data": draw(fuzz_data(key=s))}))
    elif where == "data.x":
        data = draw(fuzz_data())
        data.pairs.append((Str("x"), s))
        doc = draw(envelope(over={"data": data}))
    elif where in ("ce_id", "ce_source"):
        doc = draw(ce_structured(over={where[3:]: s}))
    elif where == "ext_value":
        doc = draw(ce_structured(over={"fzext": s}))
    elif where == "ce_header":
        body, headers = draw(ce_binary())
        i = draw(st.integers(0, max(0, len(headers) - 1)))
        name = headers[i][0] if headers else "ce_id"
        headers[i : i + 1] = [(name, _utf8(s.text))]
        return body, headers
    else:
        doc = draw(envelope(over={where: s}))
    return render(doc), []


@st.composite
def k_duplicate_keys(draw: Any) -> Drawn:
    """The same key twice in one object, with two different values (the last one wins
    in orjson; other parsers keep the first)."""
    doc = draw(envelope() | ce_structured())
    assert isinstance(doc, Obj)
    name = draw(st.sampled_from(["type", "event_id", "data", "specversion", "id", "k"]))
    value: Node
    if name == "type":
        value = draw(fuzz_type())
    elif name == "data":
        value = draw(fuzz_data())
    elif name == "k":
        data = next((v for k, v in doc.pairs if k.text == "data" and isinstance(v, Obj)), None)
        if data is not None:
            data.pairs.insert(draw(st.integers(0, len(data.pairs))), (Str("k"), draw(flow_key())))
            return render(doc), []
        value = draw(flow_key())
    else:
        value = draw(json_any | text_str)
    doc.pairs.insert(draw(st.integers(0, len(doc.pairs))), (Str(name), value))
    return render(doc), []


@st.composite
def k_bom(draw: Any) -> Drawn:
    doc = draw(envelope() | ce_structured())
    return BOM + render(doc), []


@st.composite
def k_json_value(draw: Any) -> Drawn:
    return render(draw(json_any)), []


@st.composite
def k_random_bytes(draw: Any) -> Drawn:
    return draw(st.binary(max_size=300)), []


k_tombstone: st.SearchStrategy[Drawn] = st.just((None, []))


@st.composite
def k_unmatched_type(draw: Any) -> Drawn:
    """A type no activity subscribes to: any text, or a near miss of a fuzz type."""
    roll = _roll(draw)
    if roll < 40:
        t = draw(st.sampled_from(FUZZ_TYPES))
        typ = Str(draw(st.sampled_from([t + " ", t.upper(), " " + t, t + ".x", t[:-1]])))
    elif roll < 90:
        typ = Str(draw(st.text(min_size=1, max_size=40)), draw(st.booleans()))
    else:
        typ = draw(long_str)
    return render(draw(envelope(over={"type": typ}))), []


BIG_SIZES = (250_000, 400_000, 600_000, 900_000)


@st.composite
def k_big_event(draw: Any) -> Drawn:
    """Hundreds of KB of random text under one key: a batch of 4 of them crosses
    Temporal's 2 MB blob limit; one alone is near ingress's 1 MB event limit."""
    blob = Str(long_text(draw(st.integers(0, 2**32)), draw(st.sampled_from(BIG_SIZES)), "ascii"))
    data = Obj([(Str("k"), Str("big")), (Str("p"), Raw("3")), (Str("blob"), blob)])
    typ = Str(draw(st.sampled_from(["fz.batch", "fz.debounce", "fz.plain", "fz.concurrency"])))
    return render(draw(envelope(over={"type": typ, "data": data, "event_id": None}))), []


# Bytes of one record near the broker's default limit (message.max.bytes 1,048,588 per
# batch): the broker takes some of these and refuses others (counted, not judged). A DLQ
# record adds its dlq_* headers to what it keeps, so it may not fit where the record did.
NEAR_LIMIT = (999_000, 1_040_000, 1_047_800, 1_048_100, 1_048_300)


@st.composite
def k_near_limit(draw: Any) -> Drawn:
    """A record of about ``NEAR_LIMIT`` bytes: a fuzz event just under (or over) ingress's
    1 MB event limit, or a small bad value under headers that fill the rest."""
    size = draw(st.sampled_from(NEAR_LIMIT))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    if draw(st.booleans()):
        n = draw(st.integers(1, 5))
        per = size // n - 8
        return b"{", [(f"h{i}", rnd.randbytes(per)) for i in range(n)]
    typ = draw(st.sampled_from(["fz.batch", "fz.debounce", "fz.plain", "fz.throttle"]))
    head = b'{"type":"' + typ.encode() + b'","data":{"k":"near","p":2,"blob":"'
    tail = b'"}}'
    blob = "".join(rnd.choices(string.ascii_letters, k=size - len(head) - len(tail)))
    return head + blob.encode() + tail, []


@st.composite
def k_dup_event_id(draw: Any) -> Drawn:
    """Ids shared by several records: our ``event_id``, or a CloudEvent's source + id."""
    if _roll(draw) < 60:
        eid = Str(draw(st.sampled_from(["dup-1", "dup-2", "dup-3"])))
        return render(draw(envelope(over={"event_id": eid}))), []
    over = {"id": Str(draw(st.sampled_from(["1", "2"]))), "source": Str("/fz/dup")}
    return render(draw(ce_structured(over=over))), []


KINDS: dict[str, st.SearchStrategy[Drawn]] = {
    "envelope": k_envelope(),
    "envelope_any_types": k_envelope_any(),
    "ce_structured": k_ce_structured(),
    "ce_binary": k_ce_binary(),
    "nul": k_nul(),
    "long_string": k_long_string(),
    "huge_number": k_huge_number(),
    "deep_nesting": k_deep(),
    "duplicate_keys": k_duplicate_keys(),
    "surrogate": k_surrogate(),
    "bom": k_bom(),
    "json_value": k_json_value(),
    "random_bytes": k_random_bytes(),
    "tombstone": k_tombstone,
    "unmatched_type": k_unmatched_type(),
    "big_event": k_big_event(),
    "near_limit": k_near_limit(),
    "dup_event_id": k_dup_event_id(),
}
# Most records are events of the fuzz types that pass ingress: the router's flow code,
# the windows and the worker are where one record can still hold up the others.
KIND_WEIGHTS = {
    "envelope": 34, "envelope_any_types": 5, "ce_structured": 10, "ce_binary": 10, "nul": 7,
    "long_string": 7, "huge_number": 3, "deep_nesting": 3, "duplicate_keys": 4, "surrogate": 2,
    "bom": 1, "json_value": 2, "random_bytes": 2, "tombstone": 1, "unmatched_type": 5,
    "big_event": 1, "near_limit": 1, "dup_event_id": 3,
}  # fmt: skip


def apportion(n: int) -> dict[str, int]:
    """How many of ``n`` records each kind gets: by weight, at least one each."""
    total = sum(KIND_WEIGHTS.values())
    share = {k: max(1, n * w // total) for k, w in KIND_WEIGHTS.items()}
    for k in sorted(KIND_WEIGHTS, key=lambda k: -KIND_WEIGHTS[k]):
        if sum(share.values()) >= n:
            break
        share[k] += 1
    while sum(share.values()) > n and any(v > 1 for v in share.values()):
        big = max(share, key=lambda k: share[k])
        share[big] -= 1
    return share


# Header names that mean something to someone (CloudEvents, our DLQ and ingress headers).
ODD_HEADER_NAMES = (
    "dlq_reason", "dlq_detail", "dlq_component", "dlq_source_topic", "dlq_source_partition",
    "dlq_source_offset", "dlq_attempt", "ingress_source", "ingress_stamp", "ce_specversion",
    "ce_type", "ce_id", "ce_source", "content-type", "", " ", "traceparent", "x-é", "日本",
    "a" * 300,
)  # fmt: skip
header_value = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.text(max_size=20).map(_utf8),
    st.sampled_from([b"1.0", b"7", b"fz.plain", b"0"]),
    st.builds(lambda seed: random.Random(seed).randbytes(5000), st.integers(0, 2**32)),
)
odd_headers = st.lists(
    st.tuples(st.sampled_from(ODD_HEADER_NAMES) | st.text(max_size=20), header_value),
    min_size=1,
    max_size=4,
)
kafka_key = st.one_of(
    st.binary(min_size=1, max_size=40),
    st.just(b""),
    st.builds(lambda seed: random.Random(seed).randbytes(5000), st.integers(0, 2**32)),
)


@st.composite
def records(draw: Any, kind: str) -> FuzzRecord:
    """One record of ``kind``: its value and headers, sometimes odd headers and a key."""
    value, headers = draw(KINDS[kind])
    mods: list[str] = []
    if _roll(draw) < 25:
        headers = headers + draw(odd_headers)
        mods.append("odd_headers")
    key = None
    if kind == "tombstone":  # a null value; a null key too (a broker takes both) or not
        key = draw(st.none() | kafka_key)
    elif _roll(draw) < 40:
        key = draw(kafka_key)
    if key is not None:
        mods.append("key")
    return FuzzRecord(kind, value, key, list(headers), tuple(mods))
