"""cancel_on's match keys (router/flow/cancel.py): the run's side and the cancelling
side build the same key exactly when every pair of the rule is equal."""

from __future__ import annotations

import pytest

from router.flow.cancel import cancel_key, match_key, run_keys, targets
from schemas.flow.spec import CancelRule, FlowDef, FlowKeyMissing

RULE = CancelRule.model_validate(
    {"event_type": "order.cancelled", "match": {"data.id": "data.order_id"}}
)


def test_a_cancelling_event_matches_the_run_whose_values_are_equal() -> None:
    run = {"data": {"order_id": "o1"}}
    assert run_keys([RULE], run) == (cancel_key(RULE, 0, {"data": {"id": "o1"}}),)
    assert run_keys([RULE], run) != (cancel_key(RULE, 0, {"data": {"id": "o2"}}),)


def test_the_key_does_not_depend_on_pair_order_and_integers_are_their_text() -> None:
    assert match_key([("a", "1"), ("b", "2")]) == match_key([("b", "2"), ("a", "1")])
    two = CancelRule.model_validate(
        {"event_type": "x", "match": {"data.a": "data.p", "data.b": "data.q"}}
    )
    assert run_keys([two], {"data": {"p": 1, "q": "z"}}) == (
        cancel_key(two, 0, {"data": {"a": "1", "b": "z"}}),
    )


def test_rules_on_the_same_paths_share_one_key() -> None:
    other = CancelRule.model_validate(
        {"event_type": "order.refunded", "match": {"data.ref": "data.order_id"}}
    )
    assert len(run_keys([RULE, other], {"data": {"order_id": "o1"}})) == 1


def test_a_missing_value_names_the_rule() -> None:
    with pytest.raises(FlowKeyMissing, match=r"cancel_on\[0\]\.match"):
        cancel_key(RULE, 0, {"data": {}})
    with pytest.raises(FlowKeyMissing, match=r"cancel_on\[0\]\.match"):
        run_keys([RULE], {"data": {"order_id": None}})


def test_targets_are_the_rules_naming_the_event_type() -> None:
    rules = [("a1", [RULE]), ("a2", [CancelRule(event_type="other", match={"x": "y"})])]
    got = targets(rules, "order.cancelled", {"data": {"id": "o1"}})
    assert [t.activity_id for t in got] == ["a1"]
    assert targets(rules, "nothing", {}) == []


def test_cancel_on_cannot_be_combined_with_a_window() -> None:
    with pytest.raises(ValueError, match="cancel_on and debounce"):
        FlowDef.model_validate(
            {
                "debounce": {"period": "1s"},
                "cancel_on": [{"event_type": "x", "match": {"data.a": "data.a"}}],
            }
        )
