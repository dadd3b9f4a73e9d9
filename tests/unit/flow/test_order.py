"""flow.ordered's pure parts: which line a run joins (``line_key``), which declarations
combine with ``ordered``, the run outcomes that free a line, the waiting run's backoff,
and how ``ingest flow list`` names a line's head. The SQL is tested on PostgreSQL
(tests/integration/flow/test_ordered_sql.py); end to end under faults in
tests/faults/test_flow_ordered.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from router.flow.keys import NO_KEY, FlowKeys, read_keys
from router.flow.order import OrderLines, line_key, line_rows
from schemas.flow.spec import FlowDef, FlowKeyMissing
from schemas.status import RunStatus
from workers.flow.order_activities import BACKOFF_SECONDS, MAX_BACKOFF_SECONDS
from workers.flow.order_store import FREES_LINE
from workers.permits.semaphore import backoff_delay


def _flow(**block: Any) -> FlowDef:
    return FlowDef.model_validate(block)


EVENT = {"type": "order.changed", "data": {"order_id": "o-17", "tenant": "t1", "n": 42}}


# --- line_key -----------------------------------------------------------------------


def test_a_run_of_an_ordered_activity_joins_its_keys_line() -> None:
    keys = read_keys(_flow(ordered={"key": "data.order_id"}), EVENT)
    assert line_key(keys) == "o-17"


def test_ordered_without_a_key_is_one_line_for_the_activity() -> None:
    keys = read_keys(_flow(ordered={}), EVENT)
    assert line_key(keys) == NO_KEY == ""


def test_a_number_key_is_its_text() -> None:
    assert line_key(read_keys(_flow(ordered={"key": "data.n"}), EVENT)) == "42"


def test_runs_of_other_activities_join_no_line() -> None:
    assert line_key(None) is None  # a plain activity: no flow keys at all
    assert line_key(FlowKeys(_flow(concurrency={"limit": 1, "key": "data.order_id"}))) is None


def test_the_line_follows_ordered_s_key_not_another_control_s() -> None:
    flow = _flow(ordered={"key": "data.order_id"}, concurrency={"limit": 3, "key": "data.tenant"})
    keys = read_keys(flow, EVENT)
    assert (line_key(keys), keys.key("concurrency")) == ("o-17", "t1")


def test_an_event_without_the_key_is_refused_naming_ordered() -> None:
    with pytest.raises(FlowKeyMissing) as got:
        read_keys(_flow(ordered={"key": "data.customer"}), EVENT)
    assert got.value.control == "ordered" and got.value.path == "data.customer"


# --- what combines with ordered ---------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [
        {"debounce": {"period": "2s"}},
        {"batch": {"max_size": 10, "timeout": "1s"}},
        {"rate_limit": {"limit": 1, "period": 1.0}},
        {"singleton": {"mode": "skip"}},
    ],
    ids=lambda o: next(iter(o)),
)
def test_ordered_refuses_windows_and_controls_that_skip_events(other: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=f"ordered and {next(iter(other))} cannot"):
        _flow(ordered={"key": "data.order_id"}, **other)


@pytest.mark.parametrize(
    "other",
    [
        {"concurrency": {"limit": 1, "key": "data.order_id"}},
        {"throttle": {"limit": 5, "period": 1.0}},
        {"timeouts": {"start": "10m"}},
        {"cancel_on": [{"event_type": "order.cancelled", "match": {"data.id": "data.id"}}]},
    ],
    ids=lambda o: next(iter(o)),
)
def test_ordered_combines_with_controls_that_run_every_event(other: dict[str, Any]) -> None:
    flow = _flow(ordered={"key": "data.order_id"}, **other)
    assert flow.controls()[0] == "ordered" and len(flow.controls()) == 2


# --- what frees a line, and how a waiting run asks again --------------------------------


def test_a_failed_or_unfinished_run_holds_its_line() -> None:
    assert set(FREES_LINE) == {"succeeded", "cancelled", "timed_out", "skipped"}
    for holds in (RunStatus.FAILED, RunStatus.RUNNING, RunStatus.HELD):
        assert holds not in FREES_LINE


def test_a_waiting_run_asks_again_after_2_s_doubling_to_30_s() -> None:
    rounds = [backoff_delay(n, BACKOFF_SECONDS, MAX_BACKOFF_SECONDS) for n in range(7)]
    assert rounds == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert backoff_delay(10_000, BACKOFF_SECONDS, MAX_BACKOFF_SECONDS) == 30.0


# --- OrderLines without PostgreSQL ---------------------------------------------------


class _Pool:
    """Answers what PostgreSQL would; records every statement."""

    def __init__(self, rows: list[dict[str, Any]] | None = None, status: str = "") -> None:
        self.rows, self.status, self.calls = rows or [], status, []  # type: ignore[var-annotated]

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        self.calls.append(sql)
        return self.rows

    async def execute(self, sql: str, *args: Any) -> str:
        self.calls.append(sql)
        return self.status


async def test_a_batch_without_ordered_runs_costs_no_statement() -> None:
    pool = _Pool()
    assert await OrderLines(pool).assign([]) == {}  # type: ignore[arg-type]
    assert pool.calls == []


async def test_drop_says_how_many_places_were_still_open() -> None:
    assert await OrderLines(_Pool(status="UPDATE 2")).drop(["w1", "w2", "w3"]) == 2  # type: ignore[arg-type]
    assert await OrderLines(_Pool(status="UPDATE 0")).drop(["w1"]) == 0  # type: ignore[arg-type]


async def test_flow_list_names_a_line_s_head_blocked_running_or_pending() -> None:
    aid = "7f0c1d2e-0000-4000-8000-000000000001"
    heads = [
        {"activity_id": aid, "key": "a", "waiting": 3, "run_status": "failed"},
        {"activity_id": aid, "key": "b", "waiting": 0, "run_status": "running"},
        {"activity_id": aid, "key": "c", "waiting": 1, "run_status": None},
    ]
    rows = await line_rows(_Pool(heads), aid)  # type: ignore[arg-type]
    assert [(r["key"], r["order_waiting"], r["order_head"]) for r in rows] == [
        ("a", 3, "blocked"),
        ("b", 0, "running"),
        ("c", 1, "pending"),
    ]
