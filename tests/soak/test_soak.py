"""The soak (issue 40, section 2): the whole pipeline under a steady mix for
``SOAK_MINUTES``, one fault every ``SOAK_FAULT_EVERY`` seconds, then its invariants.

The rig (``tests/soak/rig.py``): real ``ingest`` processes on a private real Temporal
server in its split shape, a private 3-broker cluster, a private PostgreSQL, Temporal
and PostgreSQL behind Toxiproxy. The load (``tests/soak/workload.py``): a burst of plain
events first, whose finished runs/s is the ceiling; then the mix at half of it (or at
``SOAK_RATE``). The figures per ``SOAK_WINDOW`` and the checks: ``docs/soak.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

import asyncpg
import orjson
import pytest

from pipeline.clients import temporal_client
from pipeline.settings import TemporalSettings
from scheduler import sync
from schemas import ids
from tests.faults import harness as h
from tests.soak import analysis, knobs, report, workload
from tests.soak.rig import FAULTS, ROTATION, Rig, memprobe_env
from tests.soak.sampler import TEST_APP, Sampler
from tests.support import kafka
from tests.support.outbox import read_committed
from tests.support.temporal_server import private_server
from tests.support.toxiproxy import private_toxiproxy, through
from tests.support.wait import eventually, quiet, wait_until

pytestmark = pytest.mark.soak

KNOBS = knobs.load()
BURST = 150  # plain events at once: the ceiling measurement
RSS_SHORT_BOUND_MB = 150  # short runs: growth of one process after the first window
RSS_FULL_MB_PER_H = 20  # full runs (issue 40)
RECOVER_S = 60  # full runs: p99 back within 2x its pre-fault value this long after a fault


def _at(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


async def _ceiling(
    pool: asyncpg.Pool, bootstrap: str, raw: str, acts: workload.Activities
) -> dict[str, Any]:
    """Plain events at once; finished runs/s from the first start to the last finish."""
    produced = workload.Produced()
    await workload.burst(bootstrap, raw, acts, BURST, produced)

    async def done() -> bool:
        n = await pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid"
            " AND status = 'succeeded'",
            acts.ids["plain"],
        )
        return int(n) >= BURST

    await eventually(done, 300, f"the {BURST} runs of the ceiling burst")
    row = await pool.fetchrow(
        "SELECT min(started_at) AS a, max(finished_at) AS b FROM activity_runs"
        " WHERE activity_id = $1::uuid",
        acts.ids["plain"],
    )
    seconds = (row["b"] - row["a"]).total_seconds()
    return {"ceiling": round(BURST / seconds, 2), "burst_s": round(seconds, 1)}


async def _batches(pool: asyncpg.Pool, aid: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT m.event_id, w.id, w.state, w.run_workflow_id FROM flow_members m"
            " JOIN flow_windows w ON w.id = m.window_id WHERE m.activity_id = $1::uuid",
            aid,
        )
    )


@pytest.mark.timeout(KNOBS.seconds + 1800)
async def test_soak(kafka_cluster, cluster_topics, fault, monkeypatch, tmp_path):
    soak = fault  # a tests.faults.harness.Scenario
    monkeypatch.delenv("DATABASE_URL", raising=False)  # Postgres.url would use it
    t_begin = time.monotonic()
    summary: dict[str, Any] = {"minutes": KNOBS.minutes, "fault_every_s": KNOBS.fault_every}
    rotation = KNOBS.faults or ROTATION
    unknown = set(rotation) - set(FAULTS)
    assert not unknown, f"SOAK_FAULTS names unknown kinds {sorted(unknown)}; known: {ROTATION}"

    # --- the private servers --------------------------------------------------------
    pg, db_url = await soak.private_postgres("soak")
    admin_url = pg.url
    server = private_server(tmp_path / "tserver", pg_port=pg.cfg.pg_port)
    soak.cleanup(lambda: asyncio.to_thread(server.stop))  # its databases go with pg
    await asyncio.to_thread(server.ensure)
    toxiproxy = private_toxiproxy(tmp_path / "toxiproxy")
    await asyncio.to_thread(toxiproxy.ensure)
    soak.cleanup(lambda: asyncio.to_thread(toxiproxy.stop))
    toxi = toxiproxy.client()
    tag = uuid.uuid4().hex[:8]
    temporal_proxy = toxi.create_proxy(f"temporal_{tag}", server.address)
    pg_proxy = toxi.create_proxy(f"pg_{tag}", f"127.0.0.1:{pg.cfg.pg_port}")
    kafka_proxies = [  # one per broker, at the address its PROXIED listener advertises
        toxi.create_proxy(f"kafka{n.node_id}_{tag}", n.proxied_upstream, n.proxied_address)
        for n in kafka_cluster.nodes
    ]

    # --- the pipeline -----------------------------------------------------------------
    topics = cluster_topics
    task_queue = f"soak-{uuid.uuid4()}"
    ep = h.Endpoints(
        kafka_cluster.proxied_bootstrap, temporal_proxy.listen, through(db_url, pg_proxy)
    )
    pipe = soak.pipeline(ep, topics, task_queue)
    pool = await asyncpg.create_pool(
        db_url, min_size=1, max_size=5, server_settings={"application_name": TEST_APP}
    )
    soak.cleanup(pool.close)
    temporal = await temporal_client(TemporalSettings(address=server.address, namespace="default"))
    acts = await workload.seed(pool)
    assert await sync.reconcile(temporal, pool, task_queue), "the cron schedule was not created"
    rig = Rig(
        pipe,
        pg,
        server,
        kafka_cluster,
        toxi,
        temporal_proxy,
        pg_proxy,
        kafka_proxies,
        KNOBS.toxic_seconds,
    )
    await rig.start_pipeline(
        memprobe_env(KNOBS, tmp_path), **dict(KNOBS.pipeline_env), TEMPORAL_NAMESPACE="default"
    )
    for child in rig.current.values():
        await eventually(child.ready, 120, f"the {child.kind} to be ready")
    summary["setup_s"] = round(time.monotonic() - t_begin)
    print(f"soak: set up in {summary['setup_s']} s; output in {tmp_path}", flush=True)

    sampler = Sampler(rig, admin_url, "soak", tmp_path / "samples.jsonl")
    approver = workload.Approver(temporal, pool, acts.ids["approval"])
    background = [asyncio.create_task(sampler.run()), asyncio.create_task(approver.run())]

    async def stop_background() -> None:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)

    soak.cleanup(stop_background)
    t0, m0 = time.time(), time.monotonic()
    end = m0 + KNOBS.seconds

    # --- load: the ceiling, then half of it, with a fault every SOAK_FAULT_EVERY s -----
    if KNOBS.rate is None:
        summary.update(await _ceiling(pool, kafka_cluster.bootstrap, topics.raw, acts))
        rate = summary["ceiling"] / 2
    else:
        rate = KNOBS.rate
    summary["rate"] = round(rate, 2)
    t_paced = time.time()  # the burst's events are not in the latency figures
    print(f"soak: {summary} ; producing until the end", flush=True)
    produced = workload.Produced()
    producing = asyncio.create_task(
        workload.produce(kafka_cluster.bootstrap, topics.raw, acts, rate, end, produced)
    )
    next_fault = m0 + KNOBS.first_fault
    n_faults = 0
    while not producing.done():
        await asyncio.sleep(min(2.0, max(0.1, next_fault - time.monotonic())))
        rig.alive()
        if time.monotonic() < next_fault or producing.done():
            continue
        if time.monotonic() + KNOBS.toxic_seconds + 30 > end:
            break  # no flow would be left to see the pipeline recover
        await rig.inject(rotation[n_faults % len(rotation)])
        n_faults += 1
        next_fault += KNOBS.fault_every
    await producing
    t_end = time.time()
    summary.update(events=produced.acked, producer_retries=produced.retries)

    # --- drain, then the invariants --------------------------------------------------
    m_drain = time.monotonic()
    print(f"soak: {produced.acked} events produced; draining", flush=True)
    await temporal.get_schedule_handle(ids.schedule_id(acts.cron)).delete()
    cron_sql = "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid"
    await asyncio.sleep(5)  # a fire dispatched just before the delete
    await quiet(lambda: pool.fetchval(cron_sql, acts.cron), "the cron runs", period=5, timeout=120)
    raw = workload.raw_events(await kafka.read_all(kafka_cluster.bootstrap, topics.raw), acts)
    by_kind = Counter(ev.kind for ev in raw)
    appended = {workload.event_workflow_id(acts, topics.raw, ev): ev for ev in raw}
    event_ids = {w for w, ev in appended.items() if ev.kind != "batch"}
    batch_events = {
        ids.source_event_id(topics.raw, ev.partition, ev.offset) for ev in raw if ev.kind == "batch"
    }
    drain_limit = h.drain_seconds(len(raw)) if KNOBS.full else 600

    async def batched() -> bool:
        rows = await _batches(pool, acts.ids["batch"])
        return len(rows) >= len(batch_events) and all(r["state"] == "started" for r in rows)

    # Not an assert yet: a batch event left out is counted below, before the asserts.
    await wait_until(batched, drain_limit)
    members = await _batches(pool, acts.ids["batch"])
    by_window: dict[int, list[str]] = {}
    for r in members:
        by_window.setdefault(r["id"], []).append(r["event_id"])
    batch_ids = {ids.batch_workflow_id(acts.ids["batch"], m) for m in by_window.values()}
    per_event = Counter(r["event_id"] for r in members)
    cron_rows = await pool.fetch(
        "SELECT workflow_id, scheduled_for FROM activity_runs WHERE activity_id = $1::uuid",
        acts.cron,
    )
    cron_ids = {r["workflow_id"] for r in cron_rows}
    outcome = await h.measure(
        temporal, pool, task_queue, event_ids | batch_ids | cron_ids, 1, timeout=drain_limit
    )
    summary["drain_s"] = round(time.monotonic() - m_drain)
    rows = await pool.fetch(
        "SELECT workflow_id, activity_id::text AS aid, started_at, finished_at FROM activity_runs"
    )
    kind_of_aid = {aid: kind for kind, aid in acts.ids.items()} | {acts.cron: "cron"}
    runs = [
        analysis.Run(
            r["workflow_id"],
            kind_of_aid.get(r["aid"], "?"),
            appended[r["workflow_id"]].appended if r["workflow_id"] in appended else None,
            _at(r["started_at"]),
            _at(r["finished_at"]),
            kind_of_aid.get(r["aid"]) in workload.LATENCY_KINDS
            and r["workflow_id"] in appended
            and appended[r["workflow_id"]].appended >= t_paced,
        )
        for r in rows
    ]
    outbox_ids = {
        r["id"] for r in await pool.fetch("SELECT id FROM outbox WHERE topic = $1", topics.out)
    }
    records = await read_committed(kafka_cluster.bootstrap, topics.out, len(outbox_ids))
    relayed = Counter(workload.record_id(m) for m in records)
    emit_runs = sum(r.kind == "emit" for r in runs)  # each wrote one outbox row
    await stop_background()

    # --- figures (recorded before any assert) ----------------------------------------
    samples = sampler.samples
    windows = analysis.windows(t0, t_end, KNOBS.window, runs, samples, rig.faults)
    growth = analysis.rss_growth(samples, after=t0 + KNOBS.window, settle=KNOBS.window)
    steps = analysis.rss_steps(samples, rig.faults)
    recovered = analysis.recovery(rig.faults, analysis.start_points(runs), end=t_end)
    finished_in_load = [r for r in runs if r.finished is not None and t0 <= r.finished < t_end]
    summary.update(
        raw_events=len(raw),
        per_kind=dict(by_kind),
        runs=outcome.runs,
        runs_per_s=round(len(finished_in_load) / (t_end - t0), 2),
        lost=outcome.lost,
        extra=outcome.extra,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        batches=len(by_window),
        batch_events_lost=len(batch_events - set(per_event)),
        batch_events_twice=sum(n > 1 for n in per_event.values()),
        cron_runs=len(cron_rows),
        approvals=len(approver.approved),
        approver_retries=approver.errors,
        outbox_rows=len(outbox_ids),
        emit_runs=emit_runs,
        relayed_missing=len(outbox_ids - set(relayed)),
        relayed_twice=sum(n > 1 for n in relayed.values()),
        relayed_unexpected=len(set(relayed) - outbox_ids),
        faults=len(rig.faults),
        kills=len(rig.killed),
        unexpected_exits=rig.unexpected_exits(),
        sampler_misses=sampler.errors,
        total_s=round(time.monotonic() - t_begin),
    )
    faults = [
        {"kind": f.kind, "at_s": round(f.start - t0), "took_s": round(f.end - f.start, 1)}
        | f.detail
        for f in rig.faults
    ]
    doc: dict[str, Any] = {
        "summary": summary,
        "windows": windows,
        "faults": faults,
        "recovery": recovered,
        "rss_growth": growth,
        "rss_steps": steps,
    }
    report.write_json(tmp_path / "soak.json", doc)
    report.write_csv(tmp_path / "windows.csv", windows)
    report.write_csv(tmp_path / "runs.csv", [dataclasses.asdict(r) for r in runs])
    report.plot(
        tmp_path / "timeline.png",
        t0,
        windows,
        samples,
        rig.faults,
        f"soak: {KNOBS.minutes:g} min, {summary['rate']} events/s, {len(rig.faults)} faults",
    )
    report.TABLE.extend(report.table(windows, report.WINDOW_COLUMNS))
    report.TABLE.append("")
    fault_rows = [
        {**f, **{k: v for k, v in r.items() if k != "kind"}}
        for f, r in zip(faults, recovered, strict=True)
    ]
    report.TABLE.extend(
        report.table(fault_rows, ("kind", "at_s", "took_s", *report.RECOVERY_COLUMNS[1:]))
    )
    report.TABLE.append("")
    report.TABLE.extend(report.memory_lines(growth, steps))
    report.TABLE.append("")
    report.TABLE.append(orjson.dumps(summary).decode())
    report.TABLE.append(
        f"files: {tmp_path}/soak.json windows.csv runs.csv samples.jsonl timeline.png"
    )

    # --- the invariants -----------------------------------------------------------------
    outcome.check()  # input set = output set, 0 duplicates (rows and executions)
    assert set(per_event) == batch_events, "batch members that are not produced events"
    assert all(n == 1 for n in per_event.values()), "an event in two batches"
    assert cron_rows, "the cron activity never ran"
    bad_cron = [
        r["workflow_id"]
        for r in cron_rows
        if r["workflow_id"] != ids.cron_workflow_id(acts.cron, r["scheduled_for"])
    ]
    assert not bad_cron, f"cron runs whose id is not their nominal time's: {bad_cron[:3]}"
    assert len({r["scheduled_for"] for r in cron_rows}) == len(cron_rows), "a nominal time twice"
    emitted = {
        ids.task_workflow_id(str(ids.run_id_for(r.workflow_id)), "emit", 0)
        for r in runs
        if r.kind == "emit"
    }
    assert emitted and emitted <= outbox_ids, f"{len(emitted - outbox_ids)} emits not in the outbox"
    assert (
        summary["relayed_missing"],
        summary["relayed_twice"],
        summary["relayed_unexpected"],
    ) == (
        0,
        0,
        0,
    ), "the relay lost, repeated or invented a record"
    assert not summary["unexpected_exits"], summary["unexpected_exits"]
    await pipe.committed_to_end("ingress", 120)
    await pipe.committed_to_end("router", 120)
    measured = {k: g for k, g in growth.items() if g["mb_per_h"] is not None}
    if KNOBS.full:
        assert measured, "no process lived long enough to measure its RSS growth"
        over = {k: g["mb_per_h"] for k, g in measured.items() if g["mb_per_h"] > RSS_FULL_MB_PER_H}
        assert not over, f"RSS growth over {RSS_FULL_MB_PER_H} MB/h: {over}"
        late = [r for r in recovered if not r.get("unmeasured") and r["recovered_s"] is None]
        assert not late, f"p99 not back within 2x in {RECOVER_S} s after: {late}"
    else:
        over = {k: g["growth_mb"] for k, g in growth.items() if g["growth_mb"] > RSS_SHORT_BOUND_MB}
        assert not over, f"RSS grew over {RSS_SHORT_BOUND_MB} MB in a short run: {over}"
