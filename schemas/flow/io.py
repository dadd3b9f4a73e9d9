"""Inputs and outputs of flow control's workflows and activities: a run's concurrency
slot (``workers/flow/slot*.py``) and the debounce and batch windows
(``workers/flow/window*.py``, ``router/flow/windows.py``). One frozen dataclass each,
JSON on the Temporal wire like :mod:`schemas.workflow_io`, whose run input and plan
carry a flow's :class:`~schemas.workflow_io.WindowInfo` and
:class:`~schemas.workflow_io.FlowSlot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.workflow_io import FlowSlot, PermitGrant

# The per-(activity, key) debounce/batch window workflow (workers/flow): the
# router signals it with start, the worker registers it.
FLOW_WINDOW_WORKFLOW = "FlowWindowWorkflow"
FLOW_WINDOW_SIGNAL = "windows"


# --- flow concurrency (workers/flow/slot*.py): a run's slot, a PostgreSQL row


@dataclass(frozen=True)
class FlowAcquireInput:
    """One admit-and-acquire round: take a slot if it is this run's turn, else queue it."""

    slot: FlowSlot
    holder: str  # the run's workflow id
    holder_run_id: str  # its Temporal run id (recorded with the slot, shown as permit_run_id)
    round_no: int = 0  # rounds already waited: sets the timer before the next one


@dataclass(frozen=True)
class FlowAcquired:
    """A round's answer: the grant, or how long to wait before the next round (a
    ``flow_wake`` signal cuts the wait short)."""

    grant: PermitGrant | None
    retry_seconds: float = 0.0


@dataclass(frozen=True)
class FlowWake:
    """The waiting runs whose turn a release made (signalled ``flow_wake``)."""

    workflow_ids: list[str]


# --- flow.ordered (workers/flow/order*.py): a run waits for its turn in its line


@dataclass(frozen=True)
class OrderTurnInput:
    """One round of a run waiting for its turn; with ``slot`` (flow.concurrency too) the
    same step makes the slot's first admission round once it is the run's turn."""

    workflow_id: str
    round_no: int = 0
    slot: FlowSlot | None = None
    holder_run_id: str = ""


@dataclass(frozen=True)
class OrderTurn:
    """A round's answer: the run's turn (and its slot's grant, if it asked for one), or
    how long to wait before the next round (a ``flow_wake`` signal cuts it short)."""

    turn: bool
    retry_seconds: float = 0.0
    grant: PermitGrant | None = None


# --- debounce and batch windows (workers/flow, router/flow/windows.py) ------


@dataclass(frozen=True)
class WindowNote:
    """One window's news in a signal to its window workflow.

    ``new_events``: events assigned to it since the last note (0 when the router only
    repeats a note after a redelivery, which must not push a debounce back);
    ``closed``: the router closed it (a batch reached max_size), start it now. The
    timing of the window travels with it, so a definition edited while it is open
    does not change it.
    """

    window_id: int
    kind: str  # "debounce" | "batch"
    new_events: int
    closed: bool = False
    period: float | None = None  # debounce
    max_wait: float | None = None  # debounce
    timeout: float | None = None  # batch


@dataclass(frozen=True)
class FlowWindowSignal:
    notes: list[WindowNote]


@dataclass(frozen=True)
class OpenWindow:
    """A window the window workflow waits on; times are ISO-8601 workflow time."""

    note: WindowNote
    opened_at: str
    last_event_at: str
    closed: bool = False


@dataclass(frozen=True)
class FlowWindowInput:
    activity_id: str
    key: str
    # Carried over continue-as-new: the windows still open, and how many runs came before.
    windows: list[OpenWindow] = field(default_factory=list)
    continued_runs: int = 0


@dataclass(frozen=True)
class CloseWindowInput:
    activity_id: str
    key: str
    window_id: int
    # Why the workflow closes it (its timer): "timeout", "quiet" or "max_wait". A window
    # the router already closed ("full") keeps its reason.
    reason: str


@dataclass(frozen=True)
class CloseWindowResult:
    outcome: str  # "started" | "duplicate" | "already_started" | "empty"
    workflow_id: str | None = None
    size: int = 0
