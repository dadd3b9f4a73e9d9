"""The event envelope, and the parser for the three accepted input forms.

1. Our JSON envelope: ``{"event_id"?, "type", "source"?, "time"?, "subject"?, "data"?}``.
2. CloudEvents structured JSON: ``{"specversion": "1.0", "id", "type", "source", ...}``.
3. CloudEvents Kafka binary mode: ``ce_specversion``, ``ce_id``, ``ce_type``, ...
   headers, with the message body as ``data`` (JSON when it parses, else a string).

A CloudEvent (2 or 3) is identified by ``source`` + ``id``, not by ``id`` alone: its
``event_id`` is :func:`schemas.ids.cloudevent_event_id` of the two, the same in both
modes. Its ``id`` itself is kept in ``extensions["id"]``, next to the other attributes
the envelope has no field for (``specversion``, extension attributes); no extension
attribute can be named ``id``, a core attribute's name.

Every rejection raises :class:`EnvelopeError` with a short machine-readable
``reason`` (the DLQ header value) and a human ``detail``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.errors import IngestError
from schemas.ids import cloudevent_event_id

# The size limit of one event, in bytes of the Kafka record value, the default of
# INGEST_MAX_EVENT_BYTES. One limit for both sides of the events topic: ingress refuses
# a raw message above it (before parsing) and an event that stamping made larger than
# it; the router refuses an event above it. So an event ingress forwarded is never too
# large for the router (stamping adds an event_id, or re-serialises, and can grow it).
MAX_EVENT_BYTES = 1_000_000
SUPPORTED_SPECVERSIONS = frozenset({"1.0"})

# DLQ reasons (stable strings: dashboards and alerts group by them)
R_INVALID_UTF8 = "invalid_utf8"
R_NOT_JSON = "not_json"
R_NOT_OBJECT = "not_object"
R_MISSING_TYPE = "missing_type"
R_BAD_FIELD = "bad_field"
R_TOO_LARGE = "too_large"
R_BAD_SPECVERSION = "unsupported_specversion"
R_MISSING_EVENT_ID = "missing_event_id"
R_BAD_HEADERS = "bad_headers"
# orjson reads JSON nested up to 1024 levels but writes at most 254, so a deeper
# document would parse and then fail when ingress re-serialises it.
R_TOO_DEEP = "too_deep"
# An identifier taken from the event (``event_id``, ``type``, a CloudEvent's ``id`` or
# ``source``) holds a control character or is longer than MAX_ID_BYTES: it would reach a
# database index, a workflow id or a log line (check_id).
R_BAD_ID = "bad_id"
# A NUL character (U+0000) anywhere in the event: PostgreSQL's jsonb and text cannot
# store it, so the event could never be written by the router or the worker.
R_NUL = "nul_character"

# The byte cap of an identifier taken from an event (and of a flow key,
# schemas.flow.spec.key_value). The longest id derived from one, a window workflow id or
# ``activity-{uuid}:{event_id}``, stays far below Temporal's 1,000-byte id limit and
# PostgreSQL's ~2,700-byte btree entry limit.
MAX_ID_BYTES = 512
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

_CE_REQUIRED = ("id", "source", "type")
_CE_CORE = {
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "subject",
    "data",
    "datacontenttype",
    "dataschema",
    "data_base64",
}


class EnvelopeError(IngestError, ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Envelope:
    type: str
    event_id: str | None = None
    source: str | None = None
    time: str | None = None
    subject: str | None = None
    data: Any = None
    # CloudEvents extension attributes and anything else worth carrying.
    extensions: dict[str, Any] = field(default_factory=dict)
    # Kafka headers passed through unchanged (name, raw bytes).
    headers: tuple[tuple[str, bytes], ...] = ()

    def with_event_id(self, event_id: str) -> Envelope:
        # A copy of the fields with one changed, without the frozen __init__ (one
        # object.__setattr__ per field): this is on ingress's hot path, per event.
        new = object.__new__(Envelope)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields["event_id"] = event_id
        return new

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"event_id": self.event_id, "type": self.type}
        if self.source is not None:
            doc["source"] = self.source
        if self.time is not None:
            doc["time"] = self.time
        if self.subject is not None:
            doc["subject"] = self.subject
        doc["data"] = self.data
        if self.extensions:
            doc["extensions"] = self.extensions
        return doc

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())


# The top-level keys Envelope.to_dict() writes for our own JSON form.
_PLAIN_KEYS = frozenset(("event_id", "type", "source", "time", "subject", "data", "extensions"))
# orjson writes at most 254 nesting levels (see R_TOO_DEEP). Every level opens with a
# '{' or '[' byte (brackets inside strings only add to the count), so a body with at
# most this many cannot nest too deep to re-serialise.
_PLAIN_MAX_BRACKETS = 200
NOT_PLAIN = (False, None)


def plain_event_id(body: bytes) -> tuple[bool, str | None]:
    """``(True, event_id or None)`` when ``body`` needs no re-serialising, else ``NOT_PLAIN``.

    A body is *plain* when it is our own JSON form, starts with ``{``, and
    :meth:`Envelope.to_json` of its parse would write the same JSON document (the
    same keys and values, key order aside) plus ``event_id``: no CloudEvents or
    unknown top-level key (to_dict drops them), no ``null`` optional field (dropped),
    ``data`` present (always written), ``extensions`` absent or a non-empty object,
    no nesting too deep to serialise, and ``event_id`` absent or a non-empty string.
    Such a body is forwarded as is, or with the stamped id spliced in by
    :func:`with_event_id_json`. Anything else (also every malformed body) returns
    ``NOT_PLAIN`` and goes through :func:`parse`, which gives the verdict.
    Headers are the caller's business: a ``ce_*`` header makes a message not plain.
    """
    if body[:1] != b"{" or (
        len(body) > _PLAIN_MAX_BRACKETS
        and body.count(b"{") + body.count(b"[") > _PLAIN_MAX_BRACKETS
    ):
        return NOT_PLAIN
    # Maybe a NUL (or an escaped backslash before u0000): parse() tells. Most bodies hold no
    # backslash (92) at all, and a byte's search (memchr) is far cheaper than a string's.
    if 92 in body and b"\\u0000" in body:
        return NOT_PLAIN
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return NOT_PLAIN
    if type(doc) is not dict or not _PLAIN_KEYS.issuperset(doc) or "data" not in doc:
        return NOT_PLAIN
    get = doc.get
    typ, eid, ext = get("type"), get("event_id", ""), get("extensions")
    if not (
        type(typ) is str
        and typ
        and type(eid) is str
        and (eid or "event_id" not in doc)
        and ("source" not in doc or type(doc["source"]) is str)
        and ("time" not in doc or type(doc["time"]) is str)
        and ("subject" not in doc or type(doc["subject"]) is str)
        and ("extensions" not in doc or (type(ext) is dict and len(ext) > 0))
        # identifiers (id_problem), at C speed for the usual ASCII: printable ASCII
        # holds no control character
        and ((typ.isascii() and typ.isprintable() and len(typ) <= MAX_ID_BYTES) or _is_id(typ))
        and (
            not eid
            or (eid.isascii() and eid.isprintable() and len(eid) <= MAX_ID_BYTES)
            or _is_id(eid)
        )
    ):
        return NOT_PLAIN
    return True, eid or None


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an identifier taken from an event, or None when it can.

    An identifier reaches database indexes, workflow ids, log lines and headers: it
    holds no control character (C0, DEL, C1; a NUL would also crash PostgreSQL's text
    type) and at most :data:`MAX_ID_BYTES` bytes of UTF-8.
    """
    found = _CONTROL.search(value)
    if found is not None:
        return f"holds control character U+{ord(found.group()):04X} at index {found.start()}"
    if len(value) * 4 > MAX_ID_BYTES:  # only then can its UTF-8 exceed the cap
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_ID_BYTES:
            return f"is {size} bytes, over the {MAX_ID_BYTES}-byte limit"
    return None


def _is_id(value: str) -> bool:
    """``id_problem(value) is None``, at C speed for ASCII (ingress's hot path): an ASCII
    string is printable exactly when it holds no C0 control character and no DEL."""
    if value.isascii() and value.isprintable():
        return len(value) <= MAX_ID_BYTES
    return id_problem(value) is None


def check_id(name: str, value: str) -> None:
    """Raise :class:`EnvelopeError` ``bad_id`` unless ``value`` is an identifier."""
    problem = id_problem(value)
    if problem is not None:
        raise EnvelopeError(R_BAD_ID, f"{name!r} {problem}")


def nul_path(doc: Any, path: str = "$") -> str | None:
    """The JSON path of the first NUL character in a key or string of ``doc``, or None."""
    if isinstance(doc, str):
        return path if "\x00" in doc else None
    if isinstance(doc, dict):
        for key, value in doc.items():
            if "\x00" in key:
                return f"{path} (a key)"
            found = nul_path(value, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found = nul_path(value, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _check_ids(env: Envelope) -> Envelope:
    """``env`` once every identifier in it passed :func:`check_id` (raises ``bad_id``)."""
    check_id("type", env.type)
    if env.extensions.get("specversion") is not None and "id" in env.extensions:
        check_id("id", env.extensions["id"])  # CloudEvents: hashed with source into event_id
        check_id("source", env.source or "")
    elif env.event_id is not None:
        check_id("event_id", env.event_id)
    return env


def with_event_id_json(body: bytes, event_id: str) -> bytes:
    """A plain body (see :func:`plain_event_id`) without ``event_id``, with it as its first key."""
    return b'{"event_id":' + orjson.dumps(event_id) + b"," + body[1:]


def _opt_str(doc: dict[str, Any], name: str) -> str | None:
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise EnvelopeError(R_BAD_FIELD, f"{name!r} must be a string, got {type(value).__name__}")
    return value


def _req_str(doc: dict[str, Any], name: str, reason: str) -> str:
    value = _opt_str(doc, name)
    if not value:
        raise EnvelopeError(reason, f"{name!r} is missing or empty")
    return value


def decode_headers(headers: Any) -> tuple[tuple[str, bytes], ...]:
    if not headers:
        return ()
    out = []
    try:
        for name, value in headers or ():
            if not isinstance(name, str) or not isinstance(value, bytes | bytearray | None):
                raise TypeError(f"header {name!r}")
            out.append((name, bytes(value or b"")))
    except (TypeError, ValueError) as exc:
        raise EnvelopeError(R_BAD_HEADERS, f"malformed Kafka headers: {exc}") from None
    return tuple(out)


def parse(
    value: bytes | None,
    headers: Any = (),
    *,
    max_bytes: int = MAX_EVENT_BYTES,
    check_serialisable: bool = True,
) -> Envelope:
    """Parse one Kafka message into an :class:`Envelope` or raise :class:`EnvelopeError`.

    The result is guaranteed to serialise with :meth:`Envelope.to_json`: anything
    that would fail there (nesting deeper than orjson writes) is rejected here, so
    a consumer never crashes on an event it already accepted. A caller that
    serialises the (stamped) envelope itself anyway passes
    ``check_serialisable=False`` and calls :func:`encode`, which raises the same
    error, so the work is done once.
    """
    env = _parse(value, headers, max_bytes)
    if check_serialisable:
        encode(env)
    return env


def encode(env: Envelope) -> bytes:
    """``env.to_json()``, with a serialisation failure raised as :class:`EnvelopeError`.

    An event holding a NUL character anywhere (orjson writes it as ``\\u0000``) is
    refused here with ``nul_character``: PostgreSQL's jsonb cannot store it, so it
    would fail every write of the router's flow control and of the worker's claim.
    """
    try:
        out = env.to_json()
    except orjson.JSONEncodeError as exc:
        if "ecursion" in str(exc):
            raise EnvelopeError(R_TOO_DEEP, "JSON nests deeper than 254 levels") from None
        raise EnvelopeError(R_BAD_FIELD, f"cannot re-serialise event: {exc}") from None
    if 92 in out and b"\\u0000" in out:  # a backslash, then maybe a NUL: the exact test
        where = nul_path(env.to_dict())
        if where is not None:
            raise EnvelopeError(R_NUL, f"a NUL character (U+0000) at {where}")
    return out


def too_large(size: int, max_bytes: int, what: str = "") -> EnvelopeError:
    """The ``too_large`` rejection of a value of ``size`` bytes (``what``: e.g. "stamped")."""
    return EnvelopeError(
        R_TOO_LARGE, f"{what + ' ' if what else ''}{size} bytes exceeds the {max_bytes}-byte limit"
    )


def _parse(value: bytes | None, headers: Any, max_bytes: int) -> Envelope:
    hdrs = decode_headers(headers)
    body = value or b""
    if len(body) > max_bytes:
        raise too_large(len(body), max_bytes)
    if hdrs:
        ce = {n[3:]: v for n, v in hdrs if n.startswith("ce_")}
        if "specversion" in ce:
            return _check_ids(_parse_binary(body, ce, hdrs))
    try:
        # orjson checks UTF-8 itself; decoding first is only needed to tell why it failed.
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = _loads_text(body)
    if not isinstance(doc, dict):
        raise EnvelopeError(R_NOT_OBJECT, f"JSON {type(doc).__name__} is not an object")
    passthrough = tuple((n, v) for n, v in hdrs if not n.startswith("ce_")) if hdrs else ()
    if "specversion" in doc:
        return _check_ids(_parse_structured(doc, passthrough))
    ext = doc.get("extensions", {})
    if not isinstance(ext, dict):
        raise EnvelopeError(R_BAD_FIELD, "'extensions' must be an object")
    get = doc.get
    typ, eid, src, tim, sub = (
        get("type"),
        get("event_id"),
        get("source"),
        get("time"),
        get("subject"),
    )
    if not (
        type(typ) is str
        and typ
        and (eid is None or type(eid) is str)
        and (src is None or type(src) is str)
        and (tim is None or type(tim) is str)
        and (sub is None or type(sub) is str)
    ):  # the field-by-field checks raise the first error in order (this is ingress's hot path)
        typ = _req_str(doc, "type", R_MISSING_TYPE)
        eid, src, tim, sub = (_opt_str(doc, n) for n in ("event_id", "source", "time", "subject"))
    env = object.__new__(Envelope)  # the frozen __init__ costs microseconds per event
    env.__dict__.update(
        type=typ,
        event_id=eid or None,
        source=src,
        time=tim,
        subject=sub,
        data=get("data"),
        extensions=ext,
        headers=passthrough,
    )
    return _check_ids(env)


def _loads_text(body: bytes) -> Any:
    """The slow path of a body orjson refused: invalid UTF-8, or not JSON (and where)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvelopeError(R_INVALID_UTF8, f"value is not UTF-8 at byte {exc.start}") from None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(R_NOT_JSON, str(exc)[:200]) from None


def _check_specversion(value: Any) -> None:
    # isinstance first: a JSON list or object is unhashable and `in` would raise TypeError.
    if not isinstance(value, str) or value not in SUPPORTED_SPECVERSIONS:
        raise EnvelopeError(R_BAD_SPECVERSION, f"CloudEvents specversion {value!r} is not 1.0")


def _parse_structured(doc: dict[str, Any], hdrs: tuple[tuple[str, bytes], ...]) -> Envelope:
    _check_specversion(doc.get("specversion"))
    for name in _CE_REQUIRED:
        _req_str(doc, name, R_MISSING_TYPE if name == "type" else R_BAD_FIELD)
    data = doc.get("data")
    if data is None and "data_base64" in doc:
        data = {"data_base64": doc["data_base64"]}
    ext = {k: v for k, v in doc.items() if k not in _CE_CORE}
    ext["specversion"] = doc["specversion"]
    ext["id"] = doc["id"]
    if "datacontenttype" in doc:
        ext["datacontenttype"] = doc["datacontenttype"]
    return Envelope(
        type=doc["type"],
        event_id=cloudevent_event_id(doc["source"], doc["id"]),
        source=doc["source"],
        time=_opt_str(doc, "time"),
        subject=_opt_str(doc, "subject"),
        data=data,
        extensions=ext,
        headers=hdrs,
    )


def _parse_binary(
    body: bytes, ce: dict[str, bytes], hdrs: tuple[tuple[str, bytes], ...]
) -> Envelope:
    try:
        attrs = {k: v.decode("utf-8") for k, v in ce.items()}
    except UnicodeDecodeError:
        raise EnvelopeError(R_BAD_HEADERS, "a ce_* header is not UTF-8") from None
    _check_specversion(attrs.get("specversion"))
    for name in _CE_REQUIRED:
        if not attrs.get(name):
            reason = R_MISSING_TYPE if name == "type" else R_BAD_FIELD
            raise EnvelopeError(reason, f"binary-mode header ce_{name} is missing or empty")
    data: Any
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvelopeError(R_INVALID_UTF8, f"value is not UTF-8 at byte {exc.start}") from None
    try:
        data = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        data = text
    core = {"specversion", "id", "source", "type", "time", "subject"}
    ext = {k: v for k, v in attrs.items() if k not in core}
    ext["specversion"] = attrs["specversion"]
    ext["id"] = attrs["id"]
    return Envelope(
        type=attrs["type"],
        event_id=cloudevent_event_id(attrs["source"], attrs["id"]),
        source=attrs["source"],
        time=attrs.get("time"),
        subject=attrs.get("subject"),
        data=data,
        extensions=ext,
        headers=tuple((n, v) for n, v in hdrs if not n.startswith("ce_")),
    )
