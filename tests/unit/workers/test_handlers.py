import httpx
import pytest

from pipeline.settings import ConfigError
from schemas.workflow_io import TaskSpec
from workers.handlers import (
    PermanentTaskError,
    Registry,
    Resources,
    RetryableTaskError,
    TaskContext,
    load_registry,
)
from workers.handlers.builtin import check_status
from workers.handlers.registry import known_task_types

FIX = "tests.unit.workers.handler_fixtures"


def test_builtins_are_registered() -> None:
    reg = load_registry(use_entry_points=False)
    assert reg.names() == ["emit", "fail", "noop", "webhook"]


def test_spec_loads_a_function_and_a_whole_module() -> None:
    reg = load_registry(f"{FIX}:plain, {FIX}", use_entry_points=False)
    assert set(reg.names()) == {
        "emit",
        "fail",
        "noop",
        "webhook",
        "plain",
        "greet",
        "shout",
        "salute",
    }
    assert "noop" in reg


def test_registered_name_wins_over_function_name() -> None:
    from tests.unit.workers import handler_fixtures as fx

    reg = load_registry(f"{FIX}:greet_formally", use_entry_points=False)
    assert reg.get("salute") is fx.greet_formally
    assert "greet_formally" not in reg


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:f", "cannot import no_such_module_xyz"),
        (f"{FIX}:missing", "has no attribute 'missing'"),
        (f"{FIX}:not_async", "must be an async function"),
        ("json", "no @register handlers in json"),
    ],
)
def test_bad_spec_is_a_config_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_registry(spec, use_entry_points=False)


def test_later_source_overrides() -> None:
    from tests.unit.workers import handler_fixtures as fx

    reg = Registry()
    reg.add(fx.greet)
    reg.add(fx.shout, "greet")
    assert reg.get("greet") is fx.shout


@pytest.mark.parametrize(
    ("status", "error"),
    [(200, None), (204, None), (400, PermanentTaskError), (404, PermanentTaskError),
     (408, RetryableTaskError), (429, RetryableTaskError), (500, RetryableTaskError),
     (503, RetryableTaskError)],
)  # fmt: skip
def test_webhook_status_classification(status: int, error: type[Exception] | None) -> None:
    if error is None:
        check_status(status)
    else:
        with pytest.raises(error):
            check_status(status, "body")


def _ctx(resources: Resources, config: dict) -> TaskContext:
    spec = TaskSpec("webhook", 0, payload={"a": 1}, config=config)
    return TaskContext("task-r:webhook:0", "r", "act", spec, 1, resources)


async def test_webhook_sends_idempotency_key_and_payload() -> None:
    from workers.handlers.builtin import webhook

    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201 if len(seen) == 1 else 422)

    http = httpx.AsyncClient(transport=httpx.MockTransport(reply))
    res = Resources(http_client=http)
    cfg = {"url": "http://hook.example/x", "headers": {"X-A": "b"}}
    await webhook(_ctx(res, cfg))
    assert seen[0].headers["Idempotency-Key"] == "task-r:webhook:0"
    assert seen[0].headers["X-A"] == "b"
    assert seen[0].content == b'{"a":1}'
    with pytest.raises(PermanentTaskError, match="422"):
        await webhook(_ctx(res, cfg))
    with pytest.raises(PermanentTaskError, match=r"config\.url"):
        await webhook(_ctx(res, {}))
    await http.aclose()


async def test_webhook_network_error_is_retryable() -> None:
    from workers.handlers.builtin import webhook

    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(boom)) as http:
        with pytest.raises(RetryableTaskError, match="ConnectError"):
            await webhook(_ctx(Resources(http_client=http), {"url": "http://h/"}))


def test_known_task_types_are_the_handlers_and_approval() -> None:
    builtins = load_registry(use_entry_points=False).names()
    assert known_task_types(use_entry_points=False) == sorted([*builtins, "approval"])
    with_spec = known_task_types(FIX, use_entry_points=False)
    assert {"greet", "shout", "salute", "approval", "noop"} <= set(with_spec)
    with pytest.raises(ConfigError):
        known_task_types("no_such_mod_q:f", use_entry_points=False)
