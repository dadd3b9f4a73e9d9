"""The data converter every Temporal client here uses: the SDK's, with dataclass decoding cached.

The SDK's JSON converter rebuilds a dataclass from its JSON by calling
``typing.get_type_hints`` on the class for every value it decodes. This project's
modules use ``from __future__ import annotations``, so every call compiles and
evaluates each field's annotation string again: about 120 µs for a one-field
result and 240 µs for a two-field one on the 2-core machine, most of the cost of
decoding a step's result in a workflow activation (docs/benchmarks.md, "Where the
worker's CPU of (b) goes"). :class:`CachedDataclassConverter` resolves a class's
fields and hints once and then builds instances exactly as the SDK does: unknown
keys ignored, each present field converted by the SDK's own ``value_to_type``
(so unions, ``None``, lists, datetimes and nested dataclasses behave as before),
``init=False`` fields set after construction, a missing required field left to
the constructor to refuse. Encoding writes the SDK's bytes (:class:`ShallowDataclassEncoder`
only skips ``dataclasses.asdict``'s deep copy), so recorded histories replay unchanged.

It lives in ``schemas`` because the workflow sandbox passes that package through
(``workers.sandbox.PASSTHROUGH``): the cache is shared by every workflow instance
of the process, not rebuilt per instance. The cache holds one entry per dataclass
type decoded, a few dozen, and only reads class-level facts.

:func:`data_converter` adds a payload codec (the encryption codec of ``pipeline/codec.py``,
when keys are set); the codec runs outside the workflow sandbox, on the bytes this
converter makes, so it changes nothing above.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_type_hints

from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
    PayloadCodec,
    value_to_type,
)

# (name, hint, init) per field, in declaration order.
_Plan = tuple[tuple[str, Any, bool], ...]


class CachedDataclassConverter(JSONTypeConverter):
    """Decodes dataclasses like the SDK's ``value_to_type``, with each class's hints cached."""

    def __init__(self) -> None:
        self._plans: dict[type, _Plan] = {}
        self._chain: list[JSONTypeConverter] = [self]

    def _plan(self, hint: type) -> _Plan:
        hints = get_type_hints(hint)
        plan = tuple((f.name, hints[f.name], f.init) for f in dataclasses.fields(hint))
        self._plans[hint] = plan
        return plan

    def to_typed_value(self, hint: type, value: Any) -> Any:
        plan = self._plans.get(hint) if isinstance(hint, type) else None
        if plan is None:
            if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
                return JSONTypeConverter.Unhandled
            plan = self._plan(hint)
        if not isinstance(value, dict):
            raise TypeError(f"Cannot convert to dataclass {hint}, value is {type(value)} not dict")
        init: dict[str, Any] = {}
        late: dict[str, Any] = {}
        for name, field_hint, in_init in plan:
            if name not in value:
                continue  # the constructor refuses a missing required field
            try:
                converted = value_to_type(field_hint, value[name], self._chain)
            except Exception as err:
                raise TypeError(f"Failed converting field {name} on dataclass {hint}") from err
            if in_init:
                init[name] = converted
            else:
                late[name] = converted
        obj = hint(**init)
        for name, v in late.items():
            object.__setattr__(obj, name, v)  # as the SDK does, frozen or not
        return obj


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


class ShallowDataclassEncoder(AdvancedJSONEncoder):
    """The SDK's JSON encoder, with a dataclass turned into a dict one level at a time.

    The SDK's ``default`` calls ``dataclasses.asdict``, which walks the whole value and
    deep-copies every leaf before ``json`` walks it again. Here a dataclass becomes the
    dict of its fields (names resolved once per class); ``json`` then meets a nested
    dataclass, set or datetime and calls ``default`` for it, as it does for everything
    ``asdict`` leaves behind. ``sort_keys`` is on, so the bytes are the SDK's
    (``tests/unit/schemas/test_converter.py`` compares them for every ``schemas`` type).
    """

    def default(self, o: Any) -> Any:
        names = _FIELD_NAMES.get(type(o))
        if names is None:
            if not dataclasses.is_dataclass(o) or isinstance(o, type):
                return super().default(o)
            names = _FIELD_NAMES[type(o)] = tuple(f.name for f in dataclasses.fields(o))
        return {name: getattr(o, name) for name in names}


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default payload converters, with the JSON one decoding through the cache
    and encoding dataclasses one level at a time."""

    def __init__(self) -> None:
        json_plain = JSONPlainPayloadConverter(
            encoder=ShallowDataclassEncoder, custom_type_converters=[_SHARED]
        )
        super().__init__(
            *(
                json_plain if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


_SHARED = CachedDataclassConverter()

# The converter without a codec. Clients get theirs from ``pipeline.codec.configured_converter``
# (this one, plus the payload codec when INGEST_CODEC_KEYS is set); the worker takes its client's.
DATA_CONVERTER = dataclasses.replace(
    DataConverter.default, payload_converter_class=PayloadConverter
)


def data_converter(
    codec: PayloadCodec | None = None, *, encode_failures: bool = False
) -> DataConverter:
    """:data:`DATA_CONVERTER` with ``codec`` (``pipeline.codec``): every payload a client or
    worker sends goes through it. ``encode_failures`` moves failure messages and stack traces
    into the failure's encoded attributes, so the codec covers them as well."""
    if codec is None:
        return DATA_CONVERTER
    return dataclasses.replace(
        DATA_CONVERTER,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes
        if encode_failures
        else DATA_CONVERTER.failure_converter_class,
    )
