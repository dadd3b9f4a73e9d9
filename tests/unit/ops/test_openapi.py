"""The OpenAPI schema names the body of every answer of every endpoint, errors included.

Issue 21: the ops endpoints answered free-form objects (``dict[str, Any]``), so
``/openapi.json`` said nothing about their fields, and FastAPI's 422 was listed where
the API answers 400.
"""

from __future__ import annotations

from typing import Any

import pytest

from ops.app import OpsDeps, create_app
from ops.settings import OpsSettings


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    # Building the schema touches no client, pool or settings: none is given.
    deps = OpsDeps(client=None, pool=None, settings=None, ops=OpsSettings())  # type: ignore[arg-type]
    return create_app(deps).openapi()


def _component(schema: dict[str, Any], body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ref = body["content"]["application/json"]["schema"]["$ref"]  # a named model, not {}
    name = ref.rsplit("/", 1)[-1]
    return name, schema["components"]["schemas"][name]


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()
    ]


def test_every_success_answer_is_a_named_model_with_its_fields(schema):
    ops = _operations(schema)
    assert len(ops) >= 15  # every /api route and /auth
    for path, method, op in ops:
        name, model = _component(schema, op["responses"]["200"])
        assert model["type"] == "object" and model["properties"], (method, path, name)
        assert model.get("additionalProperties") is not True, (method, path, name)


def test_every_error_answer_is_the_error_body(schema):
    error = schema["components"]["schemas"]["ErrorBody"]
    assert set(error["properties"]) == {"detail", "field"} and error["required"] == ["detail"]
    for path, method, op in _operations(schema):
        codes = set(op["responses"]) - {"200"}
        if path.startswith("/api/"):
            assert {"400", "401", "403", "500"} <= codes, (method, path)
        assert "422" not in codes, (method, path)  # a validation error answers 400
        for code in codes:
            assert _component(schema, op["responses"][code])[0] == "ErrorBody", (path, code)
    assert "HTTPValidationError" not in schema["components"]["schemas"]


@pytest.mark.parametrize(
    ("path", "method", "codes"),
    [
        ("/api/approvals/{task_id}", "get", {"404", "503"}),
        ("/api/tasks/{task_id}/decision", "post", {"403", "404", "409", "503"}),
        ("/api/tasks/{task_id}/fix", "post", {"404", "409", "503"}),
        ("/api/runs/{run_id}", "get", {"404", "503"}),
    ],
)
def test_routes_that_wait_on_temporal_list_their_own_errors(schema, path, method, codes):
    assert codes <= set(schema["paths"][path][method]["responses"])


def test_the_approval_state_names_its_audit_trail(schema):
    _, detail = _component(
        schema, schema["paths"]["/api/approvals/{task_id}"]["get"]["responses"]["200"]
    )
    state = schema["components"]["schemas"][
        detail["properties"]["approval"]["$ref"].rsplit("/", 1)[-1]
    ]
    assert {"status", "deadline", "audit", "continued_runs"} <= set(state["properties"])


async def test_an_unexpected_error_answers_the_error_body():
    """Not a bare "Internal Server Error": here the database pool is missing."""
    import httpx
    from pydantic import SecretStr

    token = "t" * 32
    ops = OpsSettings(token=SecretStr(token))
    deps = OpsDeps(client=None, pool=None, settings=None, ops=ops)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=create_app(deps), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
        resp = await http.get("/api/runs", headers={"Authorization": f"Bearer {token}"})
        auth = await http.get("/auth")
    assert resp.status_code == 500
    assert resp.json() == {"detail": "internal error (AttributeError); see the ops log"}
    assert auth.json() == {"token_required": True}
