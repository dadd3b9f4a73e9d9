"""bench.e2e's server counters: what a scrape counts, and that a missing one stays missing."""

from __future__ import annotations

import pytest

from bench.e2e.run import _transitions, choice, merged_counts
from bench.e2e.server_counters import merged, parse_metrics, per_run

SCRAPE = """\
# HELP state_transition_count state_transition_count histogram
# TYPE state_transition_count histogram
state_transition_count_bucket{namespace="default",le="1"} 3
state_transition_count_sum{namespace="default",namespace_state="active",service_name="history"} 90
state_transition_count_count{namespace="default",namespace_state="active",service_name="history"} 12
state_transition_count_count{namespace="other",namespace_state="active",service_name="history"} 500
persistence_requests{namespace="default",operation="UpdateWorkflow",service_name="history"} 40
persistence_requests{namespace="_unknown_",operation="UpdateShard",service_name="history"} 5
persistence_requests{operation="GetClusterMetadata",service_name="frontend"} 1
persistence_requests{namespace="other",operation="CreateTasks",service_name="matching"} 700
visibility_persistence_requests{operation="RecordWorkflowExecutionStarted",service_name="history"} 7
visibility_persistence_requests{operation="ListWorkflowExecutions",service_name="frontend"} 2
persistence_requests_total_bogus{namespace="default"} 1e9
"""


def test_a_scrape_counts_the_namespace_and_the_requests_of_no_namespace() -> None:
    assert parse_metrics(SCRAPE, "default") == {
        "state_transitions": 12.0,  # _count, not _sum; the other namespace left out
        "persistence_requests": 46.0,  # default + _unknown_ + unlabelled, not "other"
        "visibility_requests": 9.0,
    }


def test_a_metric_the_scrape_lacks_is_absent_not_zero() -> None:
    text = "\n".join(line for line in SCRAPE.splitlines() if "state_transition" not in line)
    got = parse_metrics(text, "default")
    assert "state_transitions" not in got
    assert got["persistence_requests"] == 46.0


def test_processes_are_summed_and_deltas_are_per_run() -> None:
    before = merged([{"persistence_requests": 10.0}, {"persistence_requests": 5.0}])
    after = merged(
        [{"persistence_requests": 30.0, "state_transitions": 8.0}, {"persistence_requests": 25.0}]
    )
    got = per_run(before, after, 4)
    assert got["persistence_requests"] == 10.0  # (55 - 15) / 4
    # present after but not before, or never: missing, never read as 0
    assert got["state_transitions"] is None
    assert got["pg_transactions"] is None


def test_a_phase_figure_is_missing_if_any_round_lacks_it() -> None:
    rounds: list[dict[str, float | None]] = [
        {"state_transitions": 12.0, "pg_transactions": None},
        {"state_transitions": 14.0, "pg_transactions": 30.0},
    ]
    assert merged_counts(rounds) == {"state_transitions": 13.0, "pg_transactions": None}


def test_state_transitions_come_from_the_server_else_from_the_histories() -> None:
    phase: dict[str, dict[str, float | None]] = {
        "server_per_run": {"state_transitions": 13.0},
        "history_per_run": {},
    }
    assert _transitions(phase) == 13.0
    phase = {
        "server_per_run": {"state_transitions": None},
        "history_per_run": {"state_transitions": 11},
    }
    assert _transitions(phase) == 11


def test_an_unknown_server_kind_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BENCH_E2E_TEMPORAL", "prod")
    with pytest.raises(SystemExit, match="BENCH_E2E_TEMPORAL='prod': use one of dev, server"):
        choice(None, "BENCH_E2E_TEMPORAL", "dev", ("dev", "server"))
    assert choice("server", "BENCH_E2E_TEMPORAL", "dev", ("dev", "server")) == "server"


def test_make_bench_rows_name_the_server_and_leave_missing_figures_out() -> None:
    from bench.run_all import e2e_rows

    phase = {"runs_per_second": 10.0, "server_per_run": {"state_transitions": 13.0, "pg": None}}
    shape = {
        "tasks": 1, "a": phase, "b": phase, "c": phase, "b_a": 1.0, "c_b": 1.0, "c_a": 1.0,
        "transitions_b_a": 0.76, "worker_cpu_b_a": None, "b_a_local": 0.8,
    }  # fmt: skip
    rows = e2e_rows({"temporal": "server", "shards": 4, "shapes": [shape]})
    names = [name for name, _, _ in rows]
    assert all(name.endswith("(1 task, server, 4 shards)") for name in names), names
    counters = dict((name, value) for name, value, _ in rows)[
        "e2e (a) server/run (1 task, server, 4 shards)"
    ]
    assert counters == "state_transitions 13.0"  # pg missing: left out, not 0
    assert (
        dict((n, v) for n, v, _ in rows)["e2e worker CPU b/a (1 task, server, 4 shards)"]
        == "missing"
    )
