"""The soak's mix without a server: every definition is valid, events say their kind."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest

from schemas import ids
from tests.soak import rig, workload
from workers.approvals.config import approval_config


def test_the_mix_validates_as_activity_definitions() -> None:
    acts, seeded = workload.definitions("t")
    assert len(acts) == len(workload.MIX) + 1  # and the cron activity
    by_id = {str(a.id): a for a in acts}
    assert by_id[seeded.cron].trigger.type == "cron"
    for kind in workload.MIX:
        act = by_id[seeded.ids[kind.name]]
        assert len(act.tasks) == 1, "one task per run: harness.measure counts them so"
        assert (act.flow is None) == (kind.flow is None)
    approval = by_id[seeded.ids["approval"]].tasks[0]
    assert approval_config(approval.config).approvers == [workload.APPROVER]


def test_events_carry_their_kind_and_the_ordered_key() -> None:
    _, seeded = workload.definitions("t")
    doc = orjson.loads(workload.value(13, seeded.types["ordered"]))
    assert doc["data"]["k"] == f"k{13 % workload.ORDERED_KEYS}"
    record = SimpleNamespace(partition=2, offset=7, timestamp=1_500, value=orjson.dumps(doc))
    (ev,) = workload.raw_events([record], seeded)
    assert (ev.kind, ev.appended) == ("ordered", 1.5)
    assert workload.event_workflow_id(seeded, "raw", ev) == ids.event_workflow_id(
        seeded.ids["ordered"], ids.source_event_id("raw", 2, 7)
    )
    stranger = SimpleNamespace(partition=0, offset=0, timestamp=0, value=b'{"type": "x"}')
    with pytest.raises(AssertionError, match="did not write"):
        workload.raw_events([stranger], seeded)


def test_a_relayed_record_names_its_outbox_row() -> None:
    emit = SimpleNamespace(headers=[("task_id", b"task-1:emit:0"), ("run_id", b"r")])
    notice = SimpleNamespace(headers=[("task_id", b"task-2:approval:0"), ("notice_id", b"n-1")])
    assert workload.record_id(emit) == "task-1:emit:0"
    assert workload.record_id(notice) == "n-1"


def test_the_rotation_has_every_fault_kind_once() -> None:
    assert sorted(rig.ROTATION) == sorted(rig.FAULTS)
    assert len(set(rig.ROTATION)) == len(rig.ROTATION)
    # make test's run (4 faults) sees a pipeline kill, a server kill, a toxic and a restart
    assert {k.split("_")[0] for k in rig.ROTATION[:4]} == {"kill", "net", "pg"}
