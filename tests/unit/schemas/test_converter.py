"""schemas.converter decodes exactly as the SDK's converter does, from the same bytes."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.converter import DataConverter

from schemas import approval_io, workflow_io
from schemas.converter import DATA_CONVERTER

SDK = DataConverter.default.payload_converter
OURS = DATA_CONVERTER.payload_converter


@dataclasses.dataclass(frozen=True)
class Inner:
    n: int
    when: datetime | None = None


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner | None
    items: list[Inner] = dataclasses.field(default_factory=list)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    derived: str = dataclasses.field(default="", init=False)


def _roundtrip(value: Any, hint: Any) -> tuple[Any, Any]:
    payloads = SDK.to_payloads([value])
    assert OURS.to_payloads([value]) == payloads  # encoding untouched: same bytes
    return SDK.from_payloads(payloads, [hint])[0], OURS.from_payloads(payloads, [hint])[0]


def test_nested_optional_lists_datetimes_and_init_false_fields():
    value = Outer(
        "x", Inner(1, datetime(2026, 12, 1, tzinfo=UTC)), [Inner(2), Inner(3)], {"a": [1]}
    )
    object.__setattr__(value, "derived", "set-late")
    sdk, ours = _roundtrip(value, Outer)
    assert ours == sdk == value
    assert ours.derived == "set-late" and isinstance(ours.items[0], Inner)
    assert isinstance(ours.inner.when, datetime)


def test_unknown_keys_ignored_and_missing_required_refused_as_the_sdk_does():
    payloads = SDK.to_payloads([{"n": 5, "added_by_a_newer_version": True}])
    assert OURS.from_payloads(payloads, [Inner]) == SDK.from_payloads(payloads, [Inner])
    missing = SDK.to_payloads([{"when": None}])
    with pytest.raises(TypeError):
        SDK.from_payloads(missing, [Inner])
    with pytest.raises(TypeError):
        OURS.from_payloads(missing, [Inner])
    wrong = SDK.to_payloads([{"name": "x", "inner": {"n": "not an int"}}])
    with pytest.raises(Exception, match="inner"):
        OURS.from_payloads(wrong, [Outer])


def _sample(cls: type) -> Any:
    """An instance of ``cls`` built from field defaults or simple values of its hints."""
    import types
    import typing

    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        h = hints[f.name]
        origin = typing.get_origin(h)
        args = [a for a in typing.get_args(h) if a is not type(None)]
        base = args[0] if origin in (typing.Union, types.UnionType) else h
        if isinstance(base, type) and dataclasses.is_dataclass(base):
            kwargs[f.name] = _sample(base)
        elif typing.get_origin(base) is list:
            kwargs[f.name] = []
        elif typing.get_origin(base) is dict or base is dict:
            kwargs[f.name] = {"k": "v"}
        elif base is bool:
            kwargs[f.name] = True
        elif base is int:
            kwargs[f.name] = 7
        elif base is float:
            kwargs[f.name] = 1.5
        else:
            kwargs[f.name] = "s"
    return cls(**kwargs)


SCHEMA_CLASSES = [
    c
    for mod in (workflow_io, approval_io)
    for c in vars(mod).values()
    if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == mod.__name__
]


@pytest.mark.parametrize("cls", SCHEMA_CLASSES, ids=lambda c: c.__name__)
def test_every_workflow_io_type_decodes_the_same(cls):
    try:
        value = _sample(cls)
    except (TypeError, ValueError) as exc:  # a validating __post_init__ refuses the sample
        pytest.fail(f"cannot build a sample {cls.__name__}: {exc}")
    sdk, ours = _roundtrip(value, cls)
    assert ours == sdk
    assert type(ours) is cls


class Colour(enum.StrEnum):
    RED = "red"


@dataclasses.dataclass
class Leaves:
    tags: set[str]
    pair: tuple[int, Inner]
    ident: uuid.UUID
    colour: Colour
    nested: dict[str, list[Inner]]
    when: datetime


def test_encoding_writes_the_sdks_bytes_for_sets_tuples_uuids_enums_and_nesting():
    value = Leaves(
        {"a"},  # one member: the order of a set is not the encoder's to fix
        (1, Inner(2, datetime(2026, 12, 2, tzinfo=UTC))),
        uuid.UUID(int=7),
        Colour.RED,
        {"k": [Inner(3), Inner(4)]},
        datetime(2026, 12, 2, 12, 0, tzinfo=UTC),
    )
    assert OURS.to_payloads([value]) == SDK.to_payloads([value])
    assert OURS.to_payloads([[value, {"x": value}]]) == SDK.to_payloads([[value, {"x": value}]])
