"""The ``flow`` block: what ``activities apply`` accepts, the one line per mistake, and keys."""

from __future__ import annotations

import json
import uuid

import pytest

from definitions.files import FileError, parse
from schemas.flow.spec import R_FLOW_KEY_MISSING, FlowDef, FlowKeyMissing, key_value


def _file(flow: object, trigger: object | None = None) -> str:
    act = {
        "id": str(uuid.uuid4()),
        "name": "paced",
        "trigger": trigger or {"type": "event", "event_type": "order.created"},
        "tasks": [{"type": "log"}],
        "flow": flow,
    }
    return json.dumps({"activities": [act]})


def _problems(flow: object, trigger: object | None = None) -> list[str]:
    with pytest.raises(FileError) as info:
        parse(_file(flow, trigger), ".json")
    return info.value.problems


def test_every_control_parses_with_units():
    flow = (
        parse(
            _file(
                {
                    "concurrency": {"limit": 2, "key": "data.customer_id"},
                    "throttle": {"limit": 5, "period": "2s", "burst": 2},
                    "rate_limit": {"limit": 10, "period": "1m", "key": "subject"},
                    "priority": {"key": "data.priority"},
                    "singleton": {"mode": "skip", "key": "data.customer_id"},
                }
            ),
            ".json",
        )
        .activities[0]
        .flow
    )
    assert flow is not None
    assert flow.throttle is not None and flow.throttle.period == 2.0
    assert flow.rate_limit is not None and flow.rate_limit.period == 60.0
    assert flow.keys() == {
        "concurrency": "data.customer_id",
        "rate_limit": "subject",
        "priority": "data.priority",
        "singleton": "data.customer_id",
    }
    assert flow.controls() == ["concurrency", "throttle", "rate_limit", "priority", "singleton"]


def test_debounce_and_batch_periods():
    d = FlowDef.model_validate({"debounce": {"period": "500ms", "max_wait": 3}})
    assert d.debounce is not None and d.debounce.period == 0.5 and d.debounce.max_wait == 3.0
    b = FlowDef.model_validate({"batch": {"max_size": 10, "timeout": "1.5s", "key": "data.k"}})
    assert b.batch is not None and b.batch.timeout == 1.5


@pytest.mark.parametrize(
    ("flow", "line"),
    [
        ({"concurrency": {"limit": 0}}, "activities[0].flow.concurrency.limit: Input should be"),
        ({"throttle": {"limit": 5, "period": "2 weeks"}}, "activities[0].flow.throttle.period:"),
        ({"throttle": {"limit": 5, "period": "8d"}}, "activities[0].flow.throttle.period:"),
        ({"rate_limit": {"limit": 1, "period": 1, "key": "data..x"}}, "flow.rate_limit.key:"),
        ({"singleton": {"mode": "queue"}}, "activities[0].flow.singleton.mode: Input should be"),
        ({"debounce": {"period": 5, "max_wait": 2}}, "flow.debounce: Value error, max_wait"),
        ({"priority": {"fixed": 6}, "concurrency": {"limit": 1}}, "flow.priority.fixed:"),
        ({"priority": {"fixed": 1, "key": "data.p"}}, "flow.priority: Value error, priority"),
        ({"priority": {"fixed": 1}}, "activities[0].flow: Value error, priority needs"),
        (
            {"debounce": {"period": 1}, "batch": {"max_size": 2, "timeout": 1}},
            "activities[0].flow: Value error, debounce and batch cannot be combined",
        ),
        *(
            (
                {w: c, "cancel_on": [{"event_type": "x", "match": {"data.a": "data.a"}}]},
                f"activities[0].flow: Value error, cancel_on and {w} cannot be combined: an open"
                f" {w} window is not a run yet and its run has no single event to match, so no"
                " event would ever cancel it; remove one of them",
            )
            for w, c in (("debounce", {"period": 1}), ("batch", {"max_size": 2, "timeout": 1}))
        ),
        ({"concurrency": {"limit": 1, "scope": "account"}}, "flow.concurrency.scope: Extra"),
        ({"pace": {}}, "activities[0].flow.pace: Extra inputs are not permitted"),
    ],
)
def test_one_line_per_mistake_names_the_field(flow, line):
    problems = _problems(flow)
    assert len(problems) == 1, problems
    assert line in problems[0], problems


def test_cron_activities_take_no_event_controls_or_keys():
    cron = {"type": "cron", "cron": "* * * * *"}
    assert (
        "flow.batch needs an event trigger"
        in _problems({"batch": {"max_size": 2, "timeout": 1}}, cron)[0]
    )
    assert (
        "flow.concurrency.key needs an event trigger"
        in _problems({"concurrency": {"limit": 1, "key": "data.k"}}, cron)[0]
    )
    ok = parse(_file({"concurrency": {"limit": 1}}, cron), ".json").activities[0].flow
    assert ok is not None and ok.concurrency is not None
    # cancel_on matches a run's event: a cron run has none.
    assert (
        "flow.cancel_on needs an event trigger"
        in _problems({"cancel_on": [{"event_type": "x", "match": {"data.a": "data.a"}}]}, cron)[0]
    )
    # timeouts need no event: a cron run is timed from its start request as any run.
    timed = parse(_file({"timeouts": {"start": "5m", "finish": "1h"}}, cron), ".json")
    t = timed.activities[0].flow.timeouts  # type: ignore[union-attr]
    assert t is not None and (t.start, t.finish) == (300.0, 3600.0)


EVENT = {
    "event_id": "e1",
    "type": "order.created",
    "subject": "s",
    "data": {"customer_id": "c-7", "n": 42, "vip": True, "nil": None, "f": 1.5, "empty": ""},
}


@pytest.mark.parametrize(
    ("path", "value"),
    [("data.customer_id", "c-7"), ("data.n", "42"), ("data.vip", "true"), ("subject", "s")],
)
def test_key_value_reads_scalars(path, value):
    assert key_value(EVENT, path, control="concurrency") == value


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("data.missing", "missing from the event"),
        ("data.customer_id.deeper", "missing from the event"),
        ("data.nil", "is null"),
        ("data.empty", "is empty"),
        ("data.f", "is float"),
        ("data", "is dict"),
    ],
)
def test_key_value_refuses_what_is_not_one_key(path, why):
    with pytest.raises(FlowKeyMissing) as info:
        key_value(EVENT, path, control="throttle")
    assert info.value.reason == R_FLOW_KEY_MISSING
    assert f"flow.throttle.key {path!r}: {why}" in info.value.detail


@pytest.mark.parametrize(
    ("value", "detail"),
    [("x" * 513, "513 bytes"), ("a\x00b", "U+0000"), ("a\nb", "U+000A"), ("\u0085", "U+0085")],
)
def test_a_key_that_cannot_be_a_primary_key_is_bad_flow_key(value, detail):
    from schemas.envelope import EnvelopeError
    from schemas.flow.spec import R_BAD_FLOW_KEY

    with pytest.raises(EnvelopeError) as info:
        key_value({"data": {"k": value}}, "data.k", control="throttle")
    assert info.value.reason == R_BAD_FLOW_KEY
    assert detail in info.value.detail and "flow.throttle.key" in info.value.detail
    assert key_value({"data": {"k": "x" * 512}}, "data.k", control="throttle") == "x" * 512
