"""bench.e2e: finished runs/s of (a) bare Temporal, (b) RunActivityWorkflow, (c) the pipeline.

All three in one run, on the same stack, with the same task shape (``tasks``
noop tasks per run, 1 and 4), each ``BENCH_E2E_RUNS`` runs per round (default
256, four times the runs in flight, so most of a round is steady state) in two
rounds, ordered a, b, c, c, b, a:

* (a) ``bench.e2e.bare``: a parent workflow -> one child per task -> one no-op
  activity, no database, started directly;
* (b) ``RunActivityWorkflow`` started directly with the contract id and
  REJECT_DUPLICATE (what the router does), on the production worker wiring
  (``run_worker`` with ``app.parts.worker_parts()``);
* (c) the full pipeline: events on the raw topic -> ``ingest ingress`` ->
  ``ingest router`` (real processes) -> the same worker.

All three are driven the same way, as a closed loop (``bench.common.closed_loop``):
``BENCH_E2E_IN_FLIGHT`` runs (default: the router's start concurrency, 64) are in
flight at any time; when one finishes the next is started ((a), (b)) or its event
produced ((c)). So no phase is a burst the others are not, and the servers see the
same load shape. A run is finished when its workflow result is in (for (b) and (c)
that is after ``activity_runs.finished_at`` was set, by the last task's step or
``finish_run``; the count of such rows is checked). Rates are finished runs/s
between the first and last 10 % of finishes (ramp-up and drain left out; the
whole-phase rate is in the JSON too). Every worker runs in this process with the
same Temporal ``Worker`` settings (``workers.worker.build_worker``). Ratios: b/a
(the project's workflow on top of Temporal, goal >= 0.85), c/b (Kafka and routing,
goal >= 0.9) and c/a (the pipeline on top of bare Temporal, goal >= 0.9). Alongside:
CPU ms per run of each process group and the history shape of one run of each kind
(events, workflow tasks, activity tasks, markers, state transitions).

Against either server (``--temporal dev|server``, ``BENCH_E2E_TEMPORAL``;
``bench.e2e.servers``): the stack's dev server, or a private real server started
for the run with ``--shards`` history shards (default 4) and discarded at the end.
Per phase, the server's own counters per run (``bench.e2e.server_counters``):
state transitions, persistence requests, visibility requests and, on the real
server, PostgreSQL transactions; goals (b)/(a) <= 1.2 for state transitions and
<= 1.25 for the worker's CPU (this process: both workers and the driver).
Per phase also the broker's requests per run by API (``bench.e2e.broker_requests``: the
broker's own counters through JMX, when the JDK's ``jcmd`` is installed): where the
broker's share of the pipeline's cost goes (issue 40).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from app.parts import worker_parts
from bench.common import (
    RESULTS,
    Env,
    closed_loop,
    drop_env,
    event,
    make_env,
    process_env,
    seed_activity,
    spawn,
    start_worker,
    started_producer,
    steady_rate,
    stop,
    verdict,
    write_result,
)
from bench.e2e.bare import BARE_MODULES, BareChild, BareInput, BareParent, bare_noop
from bench.e2e.broker_requests import BrokerRequests
from bench.e2e.probe import CpuMeter, find_pids, history_shape
from bench.e2e.server_counters import ServerCounters, per_run
from bench.e2e.servers import KINDS, Target, target
from pipeline.settings import Settings, load_settings
from router.settings import RouterSettings
from schemas.ids import event_workflow_id, run_id_for, task_workflow_id
from schemas.workflow_io import RunActivityInput
from workers.parts import WorkerPart
from workers.run_workflow import RunActivityWorkflow
from workers.settings import WorkerSettings
from workers.worker import build_worker

NAME = "e2e"
SHAPES = (1, 4)  # tasks per run; BENCH_E2E_SHAPES=1 measures one shape only
# Phases run a, l, b, c, then c, b, l, a: a steady drift in the machine's speed
# (another process, thermal, the dev server's growing database) then weighs on each
# phase alike, and each phase's rate is the mean of its two rounds. "l" is a_local:
# the bare shape with its no-op as a local activity (information, no goal).
ORDER = ("a", "l", "b", "c", "c", "b", "l", "a")


def _order() -> tuple[str, ...]:
    """``BENCH_E2E_ORDER`` (e.g. ``alcbbcla``) reorders the phases, for checking that a
    ratio does not come from where its phases sit; each of a, l, b, c at least once."""
    given = tuple(os.environ.get("BENCH_E2E_ORDER", "")) or ORDER
    if set(given) != set("albc"):
        raise ValueError(f"BENCH_E2E_ORDER={''.join(given)!r}: use each of a, l, b, c")
    return given


GOAL_B_A, GOAL_C_B, GOAL_C_A = 0.85, 0.9, 0.9
GOAL_TRANSITIONS_B_A, GOAL_CPU_B_A = 1.2, 1.25  # at most

E2E_ENV = {  # what the --help of bench.e2e and its diagnostics lists
    "BENCH_E2E_RUNS": "runs per round (default 256)",
    "BENCH_E2E_TASKS": "noop tasks per run (default 1)",
    "BENCH_E2E_IN_FLIGHT": "runs in flight (default: the router's start concurrency)",
    "BENCH_E2E_SHAPES": "tasks per run of each shape measured, e.g. 1,4 (default 1,4)",
    "BENCH_E2E_ORDER": "phase order, each of a, l, b, c at least once (default albccbla)",
    "BENCH_E2E_PERF": "a directory: perf record the Temporal server per phase",
    "BENCH_E2E_TEMPORAL": "dev (the stack's dev server, default) or server (a private real one)",
    "BENCH_E2E_SHARDS": "history shards of the private real server (default 4)",
    "BENCH_E2E_SERVER_SHAPE": "single (one process, default) or split (one per service)",
}


def flags(parser: Any) -> None:
    """bench.e2e's flags (each overrides its variable)."""
    parser.add_argument("--temporal", choices=KINDS, help="which server (BENCH_E2E_TEMPORAL)")
    parser.add_argument("--shards", type=int, help="real server's shards (BENCH_E2E_SHARDS)")
    parser.add_argument(
        "--server-shape", choices=("single", "split"), help="(BENCH_E2E_SERVER_SHAPE)"
    )


def choice(given: str | None, var: str, default: str, allowed: tuple[str, ...]) -> str:
    """A flag's value, else its variable's, else ``default``; one line if not allowed."""
    value = given or os.environ.get(var) or default
    if value not in allowed:
        raise SystemExit(f"{var}={value!r}: use one of {', '.join(allowed)}")
    return value


def in_flight() -> int:
    """Runs in flight in every phase: ``BENCH_E2E_IN_FLIGHT``, else the router's concurrency."""
    return int(os.environ.get("BENCH_E2E_IN_FLIGHT", "0")) or RouterSettings().concurrency


# A phase: (perf_counter at its start, each run's finish time, the runs' workflow ids)
Phase = tuple[float, list[float], list[str]]


async def _result(handle: WorkflowHandle[Any, Any], tries: int = 400) -> None:
    """The workflow's result; for (c) the router may not have started it yet.

    Counts tries rather than reading the clock: this VM's clocks can jump. The
    wait between tries grows from 20 ms to 0.5 s, so a run started soon after
    its event is not held back by a long sleep.
    """
    pause = 0.02
    for _ in range(tries):
        try:
            await handle.result()
            return
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)
    raise TimeoutError(f"{handle.id} was never started")


async def _loop(n: int, one: Callable[[int], Awaitable[object]]) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    return t0, await closed_loop(n, in_flight(), one)


async def bare_runs(client: Client, queue: str, tasks: int, n: int, local: bool = False) -> Phase:
    """(a): bare parents started directly, ``in_flight()`` at a time (``local``: a_local)."""
    tag = uuid.uuid4().hex[:8]
    wids = [f"bench-bare-{tag}-{i}" for i in range(n)]

    async def one(i: int) -> None:
        handle = await client.start_workflow(
            BareParent.run,
            BareInput(tasks, local),
            id=wids[i],
            task_queue=queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        await handle.result()

    return *await _loop(n, one), wids


def _run_input(activity_id: str, event_id: str, event_type: str, i: int) -> RunActivityInput:
    """What the router would start for ``event(...)``: (b) carries the same event
    document as (c), so both phases store and move the same payloads."""
    wid = event_workflow_id(activity_id, event_id)
    doc = orjson.loads(event(event_type, event_id, i))
    return RunActivityInput(activity_id, wid, str(run_id_for(wid)), "event", event_id, doc)


async def direct_runs(env: Env, activity_id: str, n: int) -> Phase:
    """(b): RunActivityWorkflow started directly with the contract id, ``in_flight()`` at a time."""
    runs = [_run_input(activity_id, uuid.uuid4().hex, "bench.e2e.direct", i) for i in range(n)]

    async def one(i: int) -> None:
        handle = await env.client.start_workflow(
            RunActivityWorkflow.run,
            runs[i],
            id=runs[i].workflow_id,
            task_queue=env.cfg.temporal.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        await handle.result()

    return *await _loop(n, one), [r.workflow_id for r in runs]


class LedgerWatch:
    """Which of the awaited workflow ids the router has recorded as started.

    The router writes a ``routed_triggers`` row once Temporal acknowledged the
    start (``router.ledger``). One query every ``every`` seconds serves all lanes
    of phase (c): a lane waits here until its run is started, then waits for the
    result with one long poll, as (b) does. Polling Temporal instead (NOT_FOUND
    until the router has started the run) cost the server CPU per run that (b)
    does not spend, which counted against c/b.
    """

    def __init__(self, pool: Any, every: float = 0.02) -> None:
        self.pool, self.every = pool, every
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.failed: BaseException | None = None

    async def started(self, workflow_id: str) -> None:
        if self.failed is not None:
            raise self.failed
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting[workflow_id] = fut
        await fut

    async def run(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.every)
                if not self.waiting:
                    continue
                rows = await self.pool.fetch(
                    "SELECT workflow_id FROM routed_triggers WHERE workflow_id = ANY($1::text[])",
                    list(self.waiting),
                )
                for row in rows:
                    fut = self.waiting.pop(row["workflow_id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(None)
        except Exception as exc:  # no lane may wait forever: they all fail with it
            self.failed = exc
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(exc)
            raise


async def pipeline_runs(env: Env, activity_id: str, event_type: str, n: int) -> Phase:
    """(c): events on the raw topic, ``in_flight()`` unfinished at a time; each is done
    when the run the router started for it has its result."""
    tag = uuid.uuid4().hex[:8]
    ids = [f"{tag}-{i}" for i in range(n)]
    wids = [event_workflow_id(activity_id, e) for e in ids]
    topic = env.cfg.kafka.raw_topic
    watch = LedgerWatch(env.pool)
    watching = asyncio.create_task(watch.run())
    try:
        async with started_producer(env.cfg.kafka) as producer:

            async def one(i: int) -> None:
                await producer.send_and_wait(
                    topic, event(event_type, ids[i], i), key=ids[i].encode()
                )
                await watch.started(wids[i])
                await _result(env.client.get_workflow_handle(wids[i]))  # started: no NOT_FOUND

            return *await _loop(n, one), wids
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


def _children(kind: str, wid: str, tasks: int) -> list[str]:
    if kind in ("a", "l"):
        return [f"{wid}:{i}" for i in range(tasks)]
    return [task_workflow_id(str(run_id_for(wid)), "noop", i) for i in range(tasks)]


class Bench:
    """The three measurements of one task shape, with CPU and history per run."""

    def __init__(
        self,
        env: Env,
        meter: CpuMeter,
        bare_queue: str,
        counters: ServerCounters,
        requests: BrokerRequests | None = None,
    ) -> None:
        self.env, self.meter, self.bare_queue = env, meter, bare_queue
        self.counters = counters
        self.requests = requests  # the broker's requests per run, when JMX is at hand

    async def phase(
        self, kind: str, tasks: int, n: int, go: Callable[[], Awaitable[Phase]]
    ) -> dict[str, Any]:
        counted = await self.counters.read()
        perf = await _perf_record(self.meter.groups["temporal"], f"{tasks}-{kind}")
        if self.requests is not None:
            await asyncio.to_thread(self.requests.start)
        self.meter.start()
        wall0 = time.time()
        t0, finishes, wids = await go()
        wall = time.time() - wall0
        cpu = self.meter.stop()
        requests = None if self.requests is None else await asyncio.to_thread(self.requests.stop, n)
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            await perf.wait()
        server = per_run(counted, await self.counters.read(), n)
        shape = await history_shape(self.env.client, [wids[0], *_children(kind, wids[0], tasks)])
        seconds = finishes[-1] - t0
        return {
            "runs": n,
            "in_flight": in_flight(),
            "seconds": round(seconds, 2),
            # this VM's monotonic clock has jumped before: a second clock to compare
            "wall_seconds": round(wall, 2),
            "runs_per_second": round(steady_rate(finishes), 2),
            "whole_phase_runs_per_second": round(n / seconds, 2),
            "cpu_ms_per_run": {k: round(v * 1000 / n, 1) for k, v in cpu.items()},
            "history_per_run": shape,
            "server_per_run": server,
            "broker_requests_per_run": requests,
        }

    async def idle(self, seconds: float = 5.0) -> dict[str, float | None]:
        """The server's counters per second while no run is in flight: its background
        (shard leases, queue reads), which each phase's figures include."""
        before = await self.counters.read()
        await asyncio.sleep(seconds)
        return per_run(before, await self.counters.read(), seconds + self.counters.settle)

    async def finished(self, activity_id: str) -> int:
        return int(
            await self.env.pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid"
                " AND finished_at IS NOT NULL",
                uuid.UUID(activity_id),
            )
        )

    async def shape(self, tasks: int, n: int, pipeline_aid: str, etype: str) -> dict[str, Any]:
        env = self.env
        direct_aid = await seed_activity(env.pool, "bench.e2e.direct", _tasks(tasks))
        await bare_runs(env.client, self.bare_queue, tasks, 2)  # warm both workers up
        await direct_runs(env, direct_aid, 2)
        before = await self.finished(pipeline_aid)
        go: dict[str, Callable[[], Awaitable[Phase]]] = {
            "a": lambda: bare_runs(env.client, self.bare_queue, tasks, n),
            "l": lambda: bare_runs(env.client, self.bare_queue, tasks, n, local=True),
            "b": lambda: direct_runs(env, direct_aid, n),
            "c": lambda: pipeline_runs(env, pipeline_aid, etype, n),
        }
        rounds: dict[str, list[dict[str, Any]]] = {k: [] for k in go}
        order = _order()
        for kind in order:
            rounds[kind].append(await self.phase(kind, tasks, n, go[kind]))
        expected = ((direct_aid, order.count("b") * n + 2),
                    (pipeline_aid, before + order.count("c") * n))  # fmt: skip
        for aid, want in expected:
            got = await self.finished(aid)
            assert got == want, f"activity {aid}: {got} runs finished, expected {want}"
        a, lo, b, c = (_merged(rounds[k]) for k in "albc")
        b_a = b["runs_per_second"] / a["runs_per_second"]
        c_b = c["runs_per_second"] / b["runs_per_second"]
        b_l = b["runs_per_second"] / lo["runs_per_second"]
        c_a = c["runs_per_second"] / a["runs_per_second"]
        return {
            "tasks": tasks, "a": a, "a_local": lo, "b": b, "c": c,
            "b_a": round(b_a, 3), "c_b": round(c_b, 3), "b_a_local": round(b_l, 3),
            "c_a": round(c_a, 3),
            "transitions_b_a": _ratio(_transitions(b), _transitions(a)),
            "worker_cpu_b_a": _ratio(_worker_cpu(b), _worker_cpu(a)),
        }  # fmt: skip


def _transitions(phase: dict[str, Any]) -> float | None:
    """State transitions per run: the server's metric, else the runs' own histories."""
    counted = phase["server_per_run"].get("state_transitions")
    return counted if counted is not None else phase["history_per_run"].get("state_transitions")


def _worker_cpu(phase: dict[str, Any]) -> float:
    return float(phase["cpu_ms_per_run"]["bench process"])


def _ratio(x: float | None, y: float | None) -> float | None:
    return round(x / y, 3) if x is not None and y else None


def _perf_file(label: str) -> str | None:
    given = os.environ.get("BENCH_E2E_PERF")
    if not given:
        return None
    out = Path(given)
    out.mkdir(parents=True, exist_ok=True)
    return str(out / f"{label}-{len(list(out.glob(f'{label}-*.data')))}.data")


async def _perf_record(pids: list[int], label: str) -> asyncio.subprocess.Process | None:
    """With ``BENCH_E2E_PERF=<dir>``: ``perf record`` the Temporal server during one phase.

    A diagnostic for where the server's CPU per run goes (the dev server is a
    stripped Go binary: symbolise the addresses with its ``.gopclntab``). Files are
    ``<dir>/<tasks>-<phase>-<n>.data``, n counting the phase's rounds.
    """
    out = _perf_file(label)
    if out is None or not pids:
        return None
    return await asyncio.create_subprocess_exec(
        "perf", "record", "-q", "-F", "499", "-g", "-p", ",".join(map(str, pids)), "-o", out,
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


def _merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's figures over its rounds: rates and CPU averaged, each round's rate kept."""
    first = rounds[0]

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 2)

    return {
        **first,
        "runs": sum(r["runs"] for r in rounds),
        "seconds": round(sum(r["seconds"] for r in rounds), 2),
        "wall_seconds": round(sum(r["wall_seconds"] for r in rounds), 2),
        "runs_per_second": mean([r["runs_per_second"] for r in rounds]),
        "whole_phase_runs_per_second": mean([r["whole_phase_runs_per_second"] for r in rounds]),
        "rounds_runs_per_second": [r["runs_per_second"] for r in rounds],
        "cpu_ms_per_run": {
            k: mean([r["cpu_ms_per_run"][k] for r in rounds]) for k in first["cpu_ms_per_run"]
        },
        "server_per_run": merged_counts([r["server_per_run"] for r in rounds]),
    }


def merged_counts(rounds: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Server figures per run over the rounds: the mean, or None if a round lacks one."""
    out: dict[str, float | None] = {}
    for k in rounds[0]:
        values = [r.get(k) for r in rounds]
        known = [v for v in values if v is not None]
        out[k] = round(sum(known) / len(known), 1) if len(known) == len(values) else None
    return out


def _shapes() -> tuple[int, ...]:
    given = os.environ.get("BENCH_E2E_SHAPES", "")
    return tuple(int(t) for t in given.split(",") if t.strip()) or SHAPES


def _tasks(n: int) -> list[dict[str, Any]]:
    return [{"type": "noop", "count": n}]


def _bare_worker(env: Env) -> tuple[str, Any]:
    queue = f"{env.cfg.temporal.task_queue}-bare"
    cfg: Settings = env.cfg.model_copy(
        update={"temporal": env.cfg.temporal.model_copy(update={"task_queue": queue})}
    )
    # the same sandbox treatment as the project's workflows: module passed through
    part = WorkerPart("bare", (BareParent, BareChild), [bare_noop], passthrough=BARE_MODULES)
    return queue, build_worker(env.client, cfg, WorkerSettings(), [part])


async def _pipeline_procs(env: Env) -> list[asyncio.subprocess.Process]:
    environ = process_env(
        env.cfg,
        events_topic=env.cfg.kafka.events_topic,
        task_queue=env.cfg.temporal.task_queue,
        group=f"bench-{env.tag}",
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    return [
        await spawn(kind, environ, RESULTS / f"{NAME}-{kind}.log") for kind in ("ingress", "router")
    ]


async def measure(env: Env, n: int, server: Target) -> list[dict[str, Any]]:
    worker, shutdown = start_worker(env, worker_parts())
    bare_queue, bare = _bare_worker(env)
    bare_task = asyncio.create_task(bare.run())
    # before the router starts: it reads its catalog at start-up (then every 10 s)
    shapes = _shapes()
    etypes = {tasks: f"bench.e2e.pipeline.{tasks}" for tasks in shapes}
    aids = {t: await seed_activity(env.pool, etypes[t], _tasks(t)) for t in shapes}
    procs = await _pipeline_procs(env)
    meter = CpuMeter(find_pids(int(env.cfg.temporal.address.rpartition(":")[2])))
    meter.add("temporal", server.pids)
    meter.add("ingress+router", [p.pid for p in procs])
    bench = Bench(env, meter, bare_queue, server.counters, _broker_requests(meter))
    results = []
    try:
        for tasks in shapes:
            aid, etype = aids[tasks], etypes[tasks]
            # warm-up: the processes import, join their groups and route one event
            await pipeline_runs(env, aid, etype, 1)
            idle = await bench.idle()
            results.append({**await bench.shape(tasks, n, aid, etype), "server_idle": idle})
    finally:
        await stop(procs, kill_after=None)
        await bare.shutdown()
        await bare_task
        shutdown.trigger()
        await worker
    return results


def _broker_requests(meter: CpuMeter) -> BrokerRequests | None:
    """The stack broker's request counters (``bench.e2e.broker_requests``), or None with
    the reason printed: the figures are information, the benchmark runs without them."""
    from devstack.kafka import Kafka
    from devstack.settings import StackSettings

    from bench.e2e.broker_requests import JmxUnavailable, open_jmx, tools_classpath
    from tests.support import ROOT
    from tests.support.net import free_port

    brokers = meter.groups.get("kafka", [])
    if len(brokers) != 1:
        print(f"broker requests: not counted ({len(brokers)} broker JVMs, 1 expected)")
        return None
    try:
        kafka = Kafka(StackSettings(dir=ROOT / ".stack"))
        classpath = tools_classpath(kafka.libs(), kafka.tools())
        return BrokerRequests(classpath, open_jmx(brokers[0], free_port()))
    except (JmxUnavailable, OSError) as exc:
        print(f"broker requests: not counted ({exc})")
        return None


def _figure(v: float | None) -> str:
    return "missing" if v is None else f"{v:g}"


def _print(r: dict[str, Any], server: str) -> None:
    print(f"-- {r['tasks']} task(s) per run, on {server}")
    phases = (
        ("a", "bare Temporal"), ("a_local", "bare, local activity"),
        ("b", "RunActivityWorkflow"), ("c", "pipeline"),
    )  # fmt: skip
    for kind, label in phases:
        f = r[kind]
        cpu = ", ".join(f"{k} {v}" for k, v in f["cpu_ms_per_run"].items())
        h = f["history_per_run"]
        clock = "" if abs(f["wall_seconds"] - f["seconds"]) <= 0.05 * f["seconds"] else " CLOCKS?"
        print(
            f"({kind}) {label:<20} {f['runs_per_second']:>6} runs/s (whole phase "
            f"{f['whole_phase_runs_per_second']}; {f['runs']} runs, {f['in_flight']} in flight, "
            f"{f['seconds']} s{clock}); CPU ms/run: {cpu}; history/run: {h.get('events')} events, "
            f"{h.get('workflow_tasks')} workflow tasks, {h.get('activity_tasks')} activity "
            f"tasks, {h.get('local_activity_markers', 0)} markers, "
            f"{h.get('state_transitions')} state transitions"
        )
        counts = ", ".join(
            f"{k.replace('_', ' ')} {_figure(v)}" for k, v in f["server_per_run"].items()
        )
        print(f"    server counters per run: {counts}")
        if (asked := f.get("broker_requests_per_run")) is not None:
            print(f"    broker requests per run: {', '.join(f'{k} {v}' for k, v in asked.items())}")
    idle = ", ".join(f"{k.replace('_', ' ')} {_figure(v)}" for k, v in r["server_idle"].items())
    print(f"    server counters per second, idle (included above): {idle}")
    print(verdict(f"e2e b/a ({r['tasks']} task)", r["b_a"], GOAL_B_A))
    print(verdict(f"e2e c/b ({r['tasks']} task)", r["c_b"], GOAL_C_B))
    print(verdict(f"e2e c/a ({r['tasks']} task)", r["c_a"], GOAL_C_A))
    for key, goal, what in (
        ("transitions_b_a", GOAL_TRANSITIONS_B_A, "state transitions/run"),
        ("worker_cpu_b_a", GOAL_CPU_B_A, "worker CPU/run"),
    ):
        name = f"e2e {what} b/a ({r['tasks']} task)"
        value = r[key]
        print(verdict(name, value, goal, at_most=True) if value is not None else f"{name}: missing")
    print(
        f"e2e b/a_local ({r['tasks']} task): {r['b_a_local']} (information: the project's "
        "bookkeeping on top of a bare shape that also runs its no-op as a local activity)"
    )


async def run(
    n: int | None = None,
    temporal: str | None = None,
    shards: int | None = None,
    server_shape: str | None = None,
) -> dict[str, Any]:
    """One bench.e2e run against ``temporal`` (dev or server); figures in
    ``bench/results/e2e.json`` (dev) or ``e2e_server.json`` (real server)."""
    n = n or int(os.environ.get("BENCH_E2E_RUNS", "256"))
    kind = choice(temporal, "BENCH_E2E_TEMPORAL", "dev", KINDS)
    shape = choice(server_shape, "BENCH_E2E_SERVER_SHAPE", "single", ("single", "split"))
    shards = shards or int(os.environ.get("BENCH_E2E_SHARDS", "4"))
    base = load_settings()
    async with target(
        kind,
        address=base.temporal.address,
        namespace=base.temporal.namespace,
        pg_url=base.database.url.get_secret_value(),
        shards=shards,
        shape=shape,
    ) as server:
        if not server.counters.metrics_urls:
            print(f"{server.label()}: no /metrics port found; server counters are missing")
        env = await make_env(NAME, temporal_address=server.address)
        try:
            results = await measure(env, n, server)
        finally:
            await drop_env(env)
    figures = {
        "shapes": results, "cores": os.cpu_count(), "temporal": kind, "shards": server.shards,
        "server_shape": server.shape, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    write_result(NAME if kind == "dev" else f"{NAME}_server", figures)
    for r in results:
        _print(r, server.label())
    return figures
