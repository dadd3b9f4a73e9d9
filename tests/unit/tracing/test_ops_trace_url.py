"""A run's trace in the ops API: ``trace_id`` and the link built from
``INGEST_OPS_TRACE_URL_TEMPLATE`` (``ops/settings.py``), on the listing and the detail.
The browser side: tests/integration/ops/test_console_browser.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from ops.app import OpsDeps, create_app
from ops.settings import DEFAULT_TRACE_URL_TEMPLATE, OpsSettings, load_ops_settings
from pipeline.settings import ConfigError

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_default_links_to_the_local_jaeger():
    assert DEFAULT_TRACE_URL_TEMPLATE == "http://127.0.0.1:16686/trace/{trace_id}"
    assert OpsSettings().trace_url(TRACE_ID) == f"http://127.0.0.1:16686/trace/{TRACE_ID}"


def test_the_template_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(
        "INGEST_OPS_TRACE_URL_TEMPLATE", "https://tempo.example/explore?traceId={trace_id}&x=1"
    )
    cfg = load_ops_settings()
    assert cfg.trace_url(TRACE_ID) == f"https://tempo.example/explore?traceId={TRACE_ID}&x=1"


@pytest.mark.parametrize(
    "template",
    ["http://jaeger/trace/", "javascript:alert('{trace_id}')", "http://j/{trace_id}/{span}"],
)
def test_a_bad_template_names_its_variable(monkeypatch, template):
    monkeypatch.setenv("INGEST_OPS_TRACE_URL_TEMPLATE", template)
    with pytest.raises(ConfigError, match="INGEST_OPS_TRACE_URL_TEMPLATE"):
        load_ops_settings()


def test_no_link_without_a_trace_a_w3c_id_or_a_template(monkeypatch):
    cfg = OpsSettings()
    assert cfg.trace_url(None) is None
    assert cfg.trace_url('not-hex"><script>') is None
    assert cfg.trace_url(TRACE_ID.upper()) is None  # W3C ids are lower-case hex
    monkeypatch.setenv("INGEST_OPS_TRACE_URL_TEMPLATE", "")
    assert load_ops_settings().trace_url(TRACE_ID) is None


class Pool:
    """The two reads of a run (``ops.store``): one traced run, one not."""

    def __init__(self) -> None:
        base = {
            "activity_id": str(uuid.uuid4()), "activity_name": "a", "workflow_id": "activity-x:e",
            "trigger_kind": "event", "event_id": "e", "scheduled_for": None,
            "status": "succeeded", "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": None, "task_counts": None,
        }  # fmt: skip
        self.rows = [
            {**base, "run_id": str(uuid.uuid4()), "trace_id": TRACE_ID},
            {**base, "run_id": str(uuid.uuid4()), "trace_id": None},
        ]

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return self.rows


def test_the_run_listing_carries_the_trace_and_its_link():
    ops = OpsSettings(
        token=SecretStr("t" * 32), trace_url_template="https://j.example/t/{trace_id}"
    )
    deps = OpsDeps(client=None, pool=Pool(), settings=None, ops=ops)  # type: ignore[arg-type]
    # The ops API serves only its loopback Host names (ops.guard).
    with TestClient(create_app(deps), base_url="http://127.0.0.1:8080") as http:
        resp = http.get("/api/runs", headers={"Authorization": "Bearer " + "t" * 32})
    assert resp.status_code == 200, resp.text
    traced, untraced = resp.json()["runs"]
    assert traced["trace_id"] == TRACE_ID
    assert traced["trace_url"] == f"https://j.example/t/{TRACE_ID}"
    assert (untraced["trace_id"], untraced["trace_url"]) == (None, None)


def test_the_schema_names_the_trace_fields():
    deps = OpsDeps(client=None, pool=None, settings=None, ops=OpsSettings())  # type: ignore[arg-type]
    run = create_app(deps).openapi()["components"]["schemas"]["Run"]["properties"]
    assert {"trace_id", "trace_url"} <= set(run)
