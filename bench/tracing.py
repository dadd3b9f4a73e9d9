"""bench.tracing: what OpenTelemetry tracing costs the pipeline, on against off in one run.

The full pipeline of bench.e2e's phase (c): events on the raw topic -> ``ingest
ingress`` -> ``ingest router`` -> ``ingest worker``, all three real processes, driven
by the same closed loop (``BENCH_E2E_IN_FLIGHT`` runs in flight, default the router's
start concurrency, 64; ``noop`` tasks per run). Each phase starts fresh processes: with
tracing **off** (no ``INGEST_TRACING``, no ``OTEL_*``), or **on** at 100 % sampling
(``INGEST_TRACING=1``, ``OTEL_TRACES_SAMPLER=parentbased_always_on``, OTLP/HTTP to the
stack's Jaeger; each process under its default service name, ``ingest-<component>``).
The phases run in ``BENCH_TRACING_ORDER`` (default off, on, on, off, twice), so a drift
in the machine's speed weighs on both alike; each setting's figures are the mean of its
rounds (one pass of off, on, on, off moved by 0.3 on a shared machine).

Per phase: finished runs/s (between the first and last 10 % of finishes), CPU ms per
run of ingress, router, worker, Jaeger, the servers and this process. CPU is counted
from the first measured run until 6 s after the last finish (the span exporter's 5 s
schedule, ``OTEL_BSP_SCHEDULE_DELAY``), in both phases, so the last spans' export is
inside; Jaeger's until 1 s after the processes exited (their last flush). After each
on phase, every run's trace is read back from Jaeger's query API
(its id derives from the event id, ``pipeline.tracing.trace_id_for``): spans per run,
which services, and how many traces are missing. Jaeger is the stack's (``ingest stack
up --tracing``), started here unless it answers and left running like the stack; it
keeps spans in memory, and its CPU counts other senders too, if any.

Then the off path: tracing off, what the router still runs per event (the
``nullcontext`` of ``Routing._span``, two flag tests, ``tracing.decide(None, ...)``,
``tracing.grpc_metadata()``), timed alone and put against the router's CPU per event of
the off phases. Ingress tests the flag once per slice of records and the worker once
per process (no interceptor), so the router's is the off path that counts.

The last line: runs/s on ÷ off, target >= 0.9. With 256 runs per phase (the default,
``BENCH_TRACING_RUNS``) and 8 phases one run takes about 3.5 minutes.
"""

from __future__ import annotations

import asyncio
import os
import time
import timeit
from collections.abc import Awaitable
from typing import Any, cast

from aiokafka.structs import ConsumerRecord
from devstack.jaeger import Jaeger
from devstack.procs import port_owner
from devstack.settings import StackSettings

from bench.common import (
    RESULTS,
    Env,
    drop_env,
    make_env,
    process_env,
    seed_activity,
    spawn,
    steady_rate,
    stop,
    verdict,
    write_result,
)
from bench.e2e.probe import CpuMeter, find_pids
from bench.e2e.run import in_flight, pipeline_runs
from pipeline import tracing
from router.routing import Plan, Routing
from tests.support import ROOT
from tests.support.jaeger import JaegerClient, TraceNotFound, service_of, spans, stack_jaeger

NAME = "tracing"
GOAL = 0.9  # runs/s on ÷ off, at least
ORDER = ("off", "on", "on", "off", "off", "on", "on", "off")
KINDS = ("worker", "ingress", "router")  # started in this order: the worker first
SAMPLER = "parentbased_always_on"  # 100 %: every event's trace is sampled at ingress
EVENT_TYPE = "bench.tracing"
WARMUP_RUNS = 4  # per phase, before the meter starts: imports, group joins, first runs
SETTLE_SECONDS = 6.0  # after the last finish, still measured: the exporter's 5 s schedule
JAEGER_SETTLE_SECONDS = 1.0  # after the processes exit: Jaeger's batch (200 ms) stored

TRACING_ENV = {
    "BENCH_TRACING_RUNS": "runs per phase (default 256)",
    "BENCH_TRACING_TASKS": "noop tasks per run (default 1)",
    "BENCH_TRACING_ORDER": "the phases in order, each of off and on at least once "
    "(default off,on,on,off,off,on,on,off)",
    "BENCH_E2E_IN_FLIGHT": "runs in flight (default: the router's start concurrency)",
}


def _order() -> tuple[str, ...]:
    given = os.environ.get("BENCH_TRACING_ORDER", "")
    order = tuple(p.strip() for p in given.split(",") if p.strip()) or ORDER
    if set(order) != {"off", "on"}:
        raise SystemExit(f"BENCH_TRACING_ORDER={given!r}: use off and on, e.g. off,on,on,off")
    return order


def phase_env(base: dict[str, str], on: bool, otlp_endpoint: str) -> dict[str, str]:
    """A phase's process environment: tracing off (no INGEST_TRACING, no OTEL_* from the
    caller's environment), or on at 100 % sampling, exporting over OTLP/HTTP."""
    environ = {k: v for k, v in base.items() if k != "INGEST_TRACING" and not k.startswith("OTEL_")}
    if on:
        environ.update(
            INGEST_TRACING="1",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp_endpoint,
            OTEL_TRACES_SAMPLER=SAMPLER,
        )
    return environ


def event_id_of(activity_id: str, workflow_id: str) -> str:
    """The event id in ``activity-{activity_id}:{event_id}`` (``schemas.ids``)."""
    prefix = f"activity-{activity_id}:"
    if not workflow_id.startswith(prefix):
        raise ValueError(f"{workflow_id!r} is not a run of activity {activity_id}")
    return workflow_id.removeprefix(prefix)


def jaeger_pid(cfg: StackSettings) -> int | None:
    """The stack's Jaeger process: the one its ``up`` recorded, else the OTLP port's owner."""
    return Jaeger(cfg).proc.pid() or port_owner(cfg.jaeger_otlp_http_port)


async def _watched(coro: Awaitable[Any], procs: dict[str, Any], timeout: float) -> Any:
    """``coro``'s result; fails at once if a pipeline process exits meanwhile (a lane
    would otherwise wait forever for a run nobody starts), or after ``timeout``."""
    task = asyncio.ensure_future(coro)
    deadline = time.monotonic() + timeout
    while not task.done():
        await asyncio.wait({task}, timeout=1)
        dead = [f"{k} (exit {p.returncode})" for k, p in procs.items() if p.returncode is not None]
        if not task.done() and (dead or time.monotonic() > deadline):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            why = f"{', '.join(dead)} exited" if dead else f"timed out after {timeout:.0f} s"
            raise RuntimeError(f"bench.tracing: {why}; logs in {RESULTS}/{NAME}-*.log")
    return task.result()


class Bench:
    def __init__(
        self, env: Env, meter: CpuMeter, jaeger: JaegerClient, jaeger_pid: int | None, aid: str
    ) -> None:
        self.env, self.meter, self.jaeger, self.aid = env, meter, jaeger, aid
        # Jaeger's CPU, from the meter's start until it stored what the processes sent
        # as they exited (their last flush): a meter of its own, stopped after theirs.
        self.jaeger_meter = CpuMeter({"jaeger": [jaeger_pid] if jaeger_pid else []})

    async def _start(self, on: bool, label: str) -> dict[str, Any]:
        cfg = self.env.cfg
        base = process_env(
            cfg,
            events_topic=cfg.kafka.events_topic,
            task_queue=cfg.temporal.task_queue,
            group=f"bench-{self.env.tag}",  # one group: each phase resumes the last one's offsets
        )
        environ = phase_env(base, on, self.jaeger.otlp_endpoint)
        RESULTS.mkdir(parents=True, exist_ok=True)
        return {k: await spawn(k, environ, RESULTS / f"{NAME}-{label}-{k}.log") for k in KINDS}

    async def phase(self, on: bool, n: int, label: str) -> dict[str, Any]:
        procs = await self._start(on, label)
        try:
            await _watched(pipeline_runs(self.env, self.aid, EVENT_TYPE, WARMUP_RUNS), procs, 180)
            for kind, p in procs.items():
                self.meter.add(kind, [p.pid])
            self.meter.start()
            self.jaeger_meter.start()
            t0, finishes, wids = await _watched(
                pipeline_runs(self.env, self.aid, EVENT_TYPE, n), procs, max(300.0, n)
            )
            await asyncio.sleep(SETTLE_SECONDS)
            cpu = self.meter.stop()  # before the processes exit: /proc still has them
        finally:
            await stop(procs.values())
        await asyncio.sleep(JAEGER_SETTLE_SECONDS)
        cpu["jaeger"] = self.jaeger_meter.stop()["jaeger"]
        seconds = finishes[-1] - t0
        figures: dict[str, Any] = {
            "tracing": "on" if on else "off",
            "runs": n,
            "in_flight": in_flight(),
            "seconds": round(seconds, 2),
            "runs_per_second": round(steady_rate(finishes), 2),
            "whole_phase_runs_per_second": round(n / seconds, 2),
            "cpu_ms_per_run": {k: round(v * 1000 / n, 2) for k, v in cpu.items()},
        }
        if on:  # the processes have exited, so flushed their last spans
            figures["spans"] = await asyncio.to_thread(self.count_spans, wids)
        return figures

    def count_spans(self, wids: list[str], patience: float = 20.0) -> dict[str, Any]:
        """Every run's trace read back from Jaeger: spans per run, services, missing traces.

        Jaeger stores what it receives after its own batching: read until two reads a
        second apart agree (or ``patience`` runs out)."""
        ids = [format(tracing.trace_id_for(event_id_of(self.aid, w)), "032x") for w in wids]
        deadline = time.monotonic() + patience
        last: list[int] | None = None
        while True:
            counts, example = [], None
            for tid in ids:
                try:
                    found = self.jaeger.trace(tid)
                except TraceNotFound:
                    counts.append(0)
                    continue
                counts.append(len(spans(found)))
                example = example or found
            if counts == last or time.monotonic() > deadline:
                break
            last = counts
            time.sleep(1.0)
        seen = [c for c in counts if c]
        one: dict[str, Any] = {}
        if example is not None:
            by_service: dict[str, list[str]] = {}
            for s in spans(example):
                by_service.setdefault(service_of(example, s), []).append(s["operationName"])
            one = {
                "trace_id": example["traceID"],
                "spans": len(spans(example)),
                "by_service": {k: sorted(v) for k, v in sorted(by_service.items())},
            }
        return {
            "runs": len(ids),
            "traces_missing": len(ids) - len(seen),
            "per_run_mean": round(sum(counts) / len(counts), 2) if counts else None,
            "per_run_min": min(counts, default=None),
            "per_run_max": max(counts, default=None),
            "one_run": one,
        }


def off_path(loops: int = 200_000, repeat: int = 7) -> dict[str, float]:
    """Nanoseconds per event of what the router runs for tracing while it is off, on the
    path of an event that starts one run: ``Routing._handle``'s span (a flag test and a
    ``nullcontext``), ``_start_all``'s flag test, ``tracing.decide(None, ...)`` and the
    starter's ``tracing.grpc_metadata()``. Best of ``repeat``, an empty call subtracted."""
    if tracing.ENABLED:
        raise RuntimeError("the off path is timed with tracing off in this process")
    none = cast(Any, None)
    routing = Routing(
        planner=none, starter=none, producer=none, dlq_topic="dlq", ledger=None,
        concurrency=1, on_done=lambda tp, off: None, stopping=lambda: False,
    )  # fmt: skip
    body = b'{"type": "bench.tracing", "data": {}}'
    msg = ConsumerRecord("ev", 0, 0, 0, 0, None, body, None, len(body), len(body), [])
    plan = Plan(msg)

    def traced() -> None:
        with routing._span(plan):
            if not tracing.ENABLED:
                pass
            tracing.decide(None, "started")
            tracing.grpc_metadata()

    def empty() -> None:
        pass

    best = min(timeit.repeat(traced, number=loops, repeat=repeat))
    base = min(timeit.repeat(empty, number=loops, repeat=repeat))
    return {
        "ns_per_event": round(max(best - base, 0.0) / loops * 1e9, 1),
        "ns_per_event_with_call": round(best / loops * 1e9, 1),
    }


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2)


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One setting's figures over its rounds: rates and CPU averaged, each round kept."""
    groups = rounds[0]["cpu_ms_per_run"]
    out: dict[str, Any] = {
        "runs": sum(r["runs"] for r in rounds),
        "runs_per_second": _mean([r["runs_per_second"] for r in rounds]),
        "whole_phase_runs_per_second": _mean([r["whole_phase_runs_per_second"] for r in rounds]),
        "rounds_runs_per_second": [r["runs_per_second"] for r in rounds],
        "cpu_ms_per_run": {k: _mean([r["cpu_ms_per_run"][k] for r in rounds]) for k in groups},
    }
    counted = [r["spans"] for r in rounds if "spans" in r]
    if counted:
        out["spans"] = {
            "per_run_mean": _mean([c["per_run_mean"] or 0.0 for c in counted]),
            "per_run_min": min(c["per_run_min"] or 0 for c in counted),
            "per_run_max": max(c["per_run_max"] or 0 for c in counted),
            "traces_missing": sum(c["traces_missing"] for c in counted),
            "one_run": counted[0]["one_run"],
        }
    return out


PIPELINE = ("ingress", "router", "worker")


def _ratio(x: float, y: float) -> float | None:
    return round(x / y, 3) if y else None


def figures_of(rounds: list[dict[str, Any]], micro: dict[str, float]) -> dict[str, Any]:
    """The run's figures: each setting merged, and on ÷ off."""
    off = merged([r for r in rounds if r["tracing"] == "off"])
    on = merged([r for r in rounds if r["tracing"] == "on"])
    cpu_off, cpu_on = off["cpu_ms_per_run"], on["cpu_ms_per_run"]
    pipeline_off = sum(cpu_off[k] for k in PIPELINE)
    pipeline_on = sum(cpu_on[k] for k in PIPELINE)
    router_ns = cpu_off["router"] * 1e6  # one event per run
    return {
        "off": off,
        "on": on,
        "ratio": _ratio(on["runs_per_second"], off["runs_per_second"]),
        "cpu_on_off": {k: _ratio(cpu_on[k], cpu_off[k]) for k in (*PIPELINE, "temporal")},
        "pipeline_cpu_ms_per_run": {"off": round(pipeline_off, 2), "on": round(pipeline_on, 2)},
        "pipeline_cpu_on_off": _ratio(pipeline_on, pipeline_off),
        # Jaeger's CPU per run against the pipeline's own (both phases: its idle cost too)
        "jaeger_cpu_of_pipeline": {
            "off": _ratio(cpu_off.get("jaeger", 0.0), pipeline_off),
            "on": _ratio(cpu_on.get("jaeger", 0.0), pipeline_off),
        },
        "off_path": {
            **micro,
            "router_cpu_ns_per_event": round(router_ns),
            "fraction_of_router_cpu": round(micro["ns_per_event"] / router_ns, 6)
            if router_ns
            else None,
        },
        "rounds": rounds,
    }


def _print(f: dict[str, Any]) -> None:
    for r in f["rounds"]:
        cpu = ", ".join(f"{k} {v}" for k, v in r["cpu_ms_per_run"].items())
        print(
            f"tracing {r['tracing']:<3} {r['runs_per_second']:>6} runs/s (whole phase "
            f"{r['whole_phase_runs_per_second']}; {r['runs']} runs, {r['in_flight']} in flight, "
            f"{r['seconds']} s); CPU ms/run: {cpu}"
        )
    off, on = f["off"], f["on"]
    print(
        f"runs/s: off {off['runs_per_second']} {off['rounds_runs_per_second']}, "
        f"on {on['runs_per_second']} {on['rounds_runs_per_second']}"
    )
    for k in (*PIPELINE, "jaeger", "temporal"):
        a, b = off["cpu_ms_per_run"].get(k), on["cpu_ms_per_run"].get(k)
        ratio = f"; on ÷ off {f['cpu_on_off'][k]}" if k in f["cpu_on_off"] else ""
        print(f"    CPU ms/run {k:<8} off {a}, on {b}{ratio}")
    p = f["pipeline_cpu_ms_per_run"]
    print(
        f"    CPU ms/run ingress+router+worker: off {p['off']}, on {p['on']}; "
        f"on ÷ off {f['pipeline_cpu_on_off']}; Jaeger ÷ that of off: "
        f"{f['jaeger_cpu_of_pipeline']['on']} (on), {f['jaeger_cpu_of_pipeline']['off']} (off)"
    )
    s = on.get("spans", {})
    one = s.get("one_run", {})
    print(
        f"spans per run in Jaeger: {s.get('per_run_mean')} (min {s.get('per_run_min')}, max "
        f"{s.get('per_run_max')}; {s.get('traces_missing')} of {on['runs']} traces missing)"
    )
    for service, names in one.get("by_service", {}).items():
        print(f"    one run ({one['trace_id']}), {service}: {len(names)}: {', '.join(names)}")
    o = f["off_path"]
    print(
        f"off path in the router: {o['ns_per_event']} ns per event, "
        f"{o['fraction_of_router_cpu']} of the router's CPU per event "
        f"({o['router_cpu_ns_per_event']} ns, off phases)"
    )
    print(verdict("tracing on ÷ off, runs/s at 100 % sampling", f["ratio"] or 0.0, GOAL))


async def run(n: int | None = None) -> dict[str, Any]:
    """One bench.tracing run on the running stack; figures in ``bench/results/tracing.json``."""
    n = n or int(os.environ.get("BENCH_TRACING_RUNS", "256"))
    tasks = int(os.environ.get("BENCH_TRACING_TASKS", "1"))
    order = _order()
    started = time.perf_counter()
    jaeger = await asyncio.to_thread(stack_jaeger)  # started unless it answers
    env = await make_env(NAME)
    try:
        aid = await seed_activity(env.pool, EVENT_TYPE, [{"type": "noop", "count": tasks}])
        meter = CpuMeter(find_pids(int(env.cfg.temporal.address.rpartition(":")[2])))
        pid = jaeger_pid(StackSettings(dir=ROOT / ".stack", tracing=True))
        bench = Bench(env, meter, jaeger, pid, aid)
        rounds = []
        for i, setting in enumerate(order):
            rounds.append(await bench.phase(setting == "on", n, f"{i}-{setting}"))
    finally:
        await drop_env(env)
    micro = off_path()
    figures = {
        **figures_of(rounds, micro),
        "tasks": tasks,
        "order": list(order),
        "sampler": SAMPLER,
        "jaeger": jaeger.ui_url,
        "cores": os.cpu_count(),
        "seconds": round(time.perf_counter() - started, 1),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    write_result(NAME, figures)
    _print(figures)
    return figures


if __name__ == "__main__":
    from bench.cli import parse_args

    parse_args(__doc__, TRACING_ENV)
    asyncio.run(run())
