"""Property-based fuzzing of the whole pipeline (issue 34): generated records a broker
accepts, through the real ingress, router and worker processes on the local stack.

Every record must end in exactly one of a run, a DLQ record with a documented reason
or a counted unmatched event; no process exits; the ingress and router groups commit
to the end of every partition; no run stays running (``tests/fuzz/invariant.py``).

* ``pytest tests/fuzz`` (CI): one fixed batch, :data:`CI_RECORDS` records of seed 34.
* ``make fuzz``: rounds of ``FUZZ_BATCH`` (400) records, seeds ``FUZZ_SEED`` (default:
  from the clock, printed), ``FUZZ_SEED + 1``, ... for ``FUZZ_MINUTES`` (30), or until
  ``FUZZ_RECORDS`` records. ``FUZZ_SEED=<n> FUZZ_RECORDS=<m>`` replays a run.

The report (kinds tried, outcomes, violations) is printed at the end of the session;
every violation, in full, is also written to ``fuzz-violations.txt`` in the test's
tmp dir (its path is printed).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict

import pytest

from tests.faults import harness as h
from tests.fuzz import activities, checks
from tests.fuzz.generate import generate
from tests.fuzz.invariant import REPORT, Judge, Rec, evidence
from tests.fuzz.kafka_io import TopicReader, produce

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

CI_RECORDS = 300
MINUTES = float(os.environ.get("FUZZ_MINUTES") or 0)
RECORDS = int(os.environ.get("FUZZ_RECORDS") or 0)
BATCH = int(os.environ.get("FUZZ_BATCH") or 400)
LONG = bool(MINUTES or RECORDS)
# Let Hypothesis draw literals of the pipeline's own code too (tests/fuzz/generate.py).
PROJECT_CONSTANTS = os.environ.get("FUZZ_PROJECT_CONSTANTS") == "1"
SEED = int(os.environ.get("FUZZ_SEED") or (int(time.time()) % 1_000_000 if LONG else 34))
TIMEOUT = int(MINUTES * 60 + RECORDS / 2 + 1800) if LONG else 300


def settle_seconds(n: int) -> float:
    """How long a round of ``n`` records may take to go idle before what is left counts
    as stuck: well above the ~6 runs/s of the dev server on 2 cores."""
    return 60 + 0.15 * n


def _done(records: int, t0: float) -> bool:
    if not LONG:
        return True
    if RECORDS and records >= RECORDS:
        return True
    return bool(MINUTES) and time.monotonic() - t0 >= MINUTES * 60


@pytest.mark.timeout(TIMEOUT)
async def test_every_fuzzed_record_runs_is_dead_lettered_or_counted(
    stack, cfg, topics, task_queue, temporal, db_pool, fault, tmp_path
):
    acts = await activities.seed(db_pool)
    judge = Judge(topics.raw, topics.events, acts)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    fault.cleanup(lambda: checks.terminate_left(temporal, task_queue))
    names = (topics.raw, topics.events, topics.dlq)
    readers = [await TopicReader(stack.kafka, t).start() for t in names]
    raw, events, dlq = readers
    fault.cleanup(lambda: asyncio.gather(*(r.stop() for r in readers)))
    procs = checks.Processes(pipe, judge)
    await procs.start()
    stuck = checks.Stuck(set(), set(), set(), set())
    owners: dict[str, list[Rec]] = defaultdict(list)
    t0, rnd, total, note = time.monotonic(), 0, 0, ""
    try:
        while True:
            n = min(BATCH, RECORDS - total) if RECORDS else BATCH if LONG else CI_RECORDS
            before = len(judge.violations)
            batch = generate(SEED + rnd, n, PROJECT_CONSTANTS)
            produced = await asyncio.to_thread(produce, stack.kafka, topics.raw, batch)
            for i, why in produced.refused.items():
                judge.refused[f"{batch[i].kind} ({why[:60]})"] += 1
            recs = judge.add_raw(rnd, batch, produced.coords, await raw.read_new())
            waited = await checks.settle(procs, db_pool, temporal, stuck, settle_seconds(n))
            judge.add_events(await events.read_new())
            judge.add_dlq(await dlq.read_new())
            ev = await evidence(db_pool, judge.pairs(recs))
            for k, v in judge.owners(recs, ev).items():
                owners[k] += v
            crashed = any(v.category == "process_exit" for v in judge.violations[before:])
            judge.judge(rnd, recs, ev, crashed)
            await checks.offsets(procs, judge, stuck)
            await checks.stuck_runs(procs, db_pool, temporal, judge, owners, stuck, waited)
            note = await checks.unmatched(procs, judge)
            await procs.check()
            total += len(recs)
            print(
                f"fuzz round {rnd} (seed {SEED + rnd}): {len(recs)} records, idle after"
                f" {waited:.0f}s; {total} so far, {len(judge.violations)} violations,"
                f" {time.monotonic() - t0:.0f}s",
                flush=True,
            )
            rnd += 1
            if procs.given_up:
                judge.violation(
                    "gave_up", f"stopped after round {rnd - 1}: {procs.given_up} kept exiting"
                )
                break
            if _done(total, t0):
                break
    finally:
        try:
            failed = await checks.failed_runs(db_pool)
        except Exception as exc:  # the report must not hide the test's own error
            failed = [f"  (not read: {exc!r})"]
        out = tmp_path / "fuzz-violations.txt"
        out.write_text("\n\n".join(v.render() for v in judge.violations) + "\n")
        REPORT[:] = [
            f"seed {SEED}, {rnd} round(s) of up to {BATCH if LONG else CI_RECORDS} records,"
            f" {time.monotonic() - t0:.0f}s; replay: FUZZ_SEED={SEED} FUZZ_RECORDS={total}"
            f" FUZZ_BATCH={BATCH if LONG else CI_RECORDS}"
            f" FUZZ_PROJECT_CONSTANTS={int(PROJECT_CONSTANTS)}",
            *judge.summary(),
            note,
            *(["runs that failed (not a violation), by error:", *failed] if failed else []),
            f"process restarts: {dict(procs.restarts) or 0}",
            f"every violation: {out}",
        ]
    assert not judge.violations, violations_message(judge, out)


# The order violations are shown in: causes first, their consequences last.
ORDER = (
    "process_exit", "gave_up", "offsets_behind", "no_outcome", "two_outcomes", "run_stuck",
    "window_stuck", "dlq_coordinates", "undocumented_reason", "unmatched_count",
    "forwarded_twice", "bad_event", "late_outcome", "redelivered_after_exit",
)  # fmt: skip
PER_CATEGORY = 6


def violations_message(judge: Judge, out: object) -> str:
    """The first violations of each category (causes first), and where the rest are."""
    by: dict[str, list[str]] = defaultdict(list)
    for v in judge.violations:
        by[v.category].append(v.render())
    cats = sorted(by, key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER))
    counts = ", ".join(f"{c} {len(by[c])}" for c in cats)
    parts = [f"{len(judge.violations)} violations of the invariant ({counts}):"]
    for c in cats:
        parts += by[c][:PER_CATEGORY]
        if len(by[c]) > PER_CATEGORY:
            parts.append(f"... {len(by[c]) - PER_CATEGORY} more [{c}] in {out}")
    return "\n\n".join(parts)
