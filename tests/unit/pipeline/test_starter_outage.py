"""Which start failures the starter retries (``pipeline.starter.outage``): an outage is
retried with the offset held back; a refusal is dead-lettered."""

from __future__ import annotations

import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from temporalio.api.common.v1 import GrpcStatus
from temporalio.service import RPCError, RPCStatusCode

from pipeline.starter import E_NAMESPACE_NOT_FOUND, START_ERROR_LABELS, outage

NS_DETAIL = "type.googleapis.com/temporal.api.errordetails.v1.NamespaceNotFoundFailure"
WF_DETAIL = "type.googleapis.com/temporal.api.errordetails.v1.NotFoundFailure"


def _error(status: RPCStatusCode, message: str, detail: str | None = None) -> RPCError:
    grpc = GrpcStatus(code=status.value, message=message)
    if detail is not None:
        grpc.details.append(AnyProto(type_url=detail))
    return RPCError(message, status, grpc.SerializeToString())


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (_error(RPCStatusCode.UNAVAILABLE, "connection refused"), "UNAVAILABLE"),
        # The real server, while its PostgreSQL is down, about a namespace that exists.
        (
            _error(RPCStatusCode.NOT_FOUND, "Namespace default is not found.", NS_DETAIL),
            E_NAMESPACE_NOT_FOUND,
        ),
        (_error(RPCStatusCode.NOT_FOUND, "workflow not found", WF_DETAIL), None),
        (_error(RPCStatusCode.NOT_FOUND, "Namespace x is not found."), None),  # no detail
        (_error(RPCStatusCode.INVALID_ARGUMENT, "WorkflowId exceeds length limit"), None),
        # The credentials, not the message: an expired JWT, a revoked permission.
        (_error(RPCStatusCode.PERMISSION_DENIED, "Request unauthorized."), "PERMISSION_DENIED"),
        (_error(RPCStatusCode.UNAUTHENTICATED, "token expired"), "UNAUTHENTICATED"),
    ],
)
def test_outage_or_refusal(error: RPCError, label: str | None) -> None:
    assert outage(error) == label


def test_every_label_the_starter_counts_starts_at_zero() -> None:
    assert E_NAMESPACE_NOT_FOUND in START_ERROR_LABELS
    assert "UNAVAILABLE" in START_ERROR_LABELS


async def test_a_start_retrying_an_outage_makes_the_process_not_ready_until_it_succeeds() -> None:
    """While the starter waits out Temporal's outage, ``/readyz`` (which answers from
    ``RETRYING``) names it; once the start goes through, the process is ready again."""
    from pipeline.retry import RETRYING
    from pipeline.starter import STARTED, Starter
    from schemas.workflow_io import RunActivityInput

    seen: list[str | None] = []

    class Client:
        calls = 0

        async def start_workflow(self, *args: object, **kwargs: object) -> None:
            Client.calls += 1
            seen.append(RETRYING.why_not_ready())
            if Client.calls < 3:
                raise _error(RPCStatusCode.UNAVAILABLE, "connection refused")

    starter = Starter(Client(), "tq", backoff_initial=0.001, backoff_max=0.002)  # type: ignore[arg-type]
    run = RunActivityInput("a1", "activity-a1:e1", "r1", "event", "e1", {"type": "t"})
    assert await starter.start(run) == STARTED
    assert seen[0] is None  # the first attempt: nothing failing yet
    assert seen[1] is not None and seen[1].startswith("start of a run retrying for")
    assert "RPCError: connection refused" in (seen[2] or "")
    assert RETRYING.why_not_ready() is None


class _Scripted:
    """A client whose ``start_workflow`` raises the scripted errors in turn, then returns."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def start_workflow(self, *args: object, **kwargs: object) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def _run() -> object:
    from schemas.workflow_io import RunActivityInput

    return RunActivityInput("a1", "activity-a1:e1", "r1", "event", "e1", {"type": "t"})


async def test_a_refusal_is_rejected_at_once_and_a_duplicate_absorbed() -> None:
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from pipeline.starter import DUPLICATE, Starter, StartRejected

    client = _Scripted(_error(RPCStatusCode.INVALID_ARGUMENT, "WorkflowId exceeds length limit"))
    with pytest.raises(StartRejected, match="INVALID_ARGUMENT: WorkflowId exceeds"):
        await Starter(client, "tq").start(_run())  # type: ignore[arg-type]
    assert client.calls == 1
    client = _Scripted(WorkflowAlreadyStartedError("activity-a1:e1", "RunActivityWorkflow"))
    assert await Starter(client, "tq").start(_run()) == DUPLICATE  # type: ignore[arg-type]


async def test_without_outage_retries_the_error_comes_as_it_came() -> None:
    from pipeline.starter import Starter

    down = _error(RPCStatusCode.UNAVAILABLE, "connection refused")
    client = _Scripted(down)
    with pytest.raises(RPCError) as got:
        await Starter(client, "tq", retry_outages=False).start(_run())  # type: ignore[arg-type]
    assert got.value is down and client.calls == 1


async def test_a_stopping_process_gives_up_the_start_naming_the_workflow() -> None:
    from pipeline.retry import RETRYING, ShutdownRequested
    from pipeline.starter import Starter

    client = _Scripted(_error(RPCStatusCode.UNAVAILABLE, "connection refused"))
    starter = Starter(client, "tq", stopping=lambda: True)  # type: ignore[arg-type]
    with pytest.raises(ShutdownRequested, match="start of activity-a1:e1"):
        await starter.start(_run())  # type: ignore[arg-type]
    assert RETRYING.why_not_ready() is None
