"""The README's "publish an event" snippet, run twice as a newcomer would, starts one run.

The snippet is taken from README.md and run as a script, only pointed at this test's
raw topic. The real ingress, router and worker then carry both messages: the second
must be suppressed as a duplicate (the README says so), and only one run exists.
"""

from __future__ import annotations

import asyncio
import re
import sys
import uuid

from ingress.service import run_ingress
from ingress.settings import IngressSettings
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import RouterSettings
from schemas import ids
from tests.support import ROOT, db, kafka, metrics, wait
from tests.support.temporal import exists
from workers.settings import WorkerSettings
from workers.worker import run_worker

SNIPPET = re.compile(r"```bash\n\.venv/bin/python - <<'EOF'\n(.*?)\nEOF\n```", re.S)


def _snippet(raw_topic: str, bootstrap: str) -> tuple[str, str]:
    """The README's snippet on ``raw_topic``, and the event type it publishes."""
    (code,) = SNIPPET.findall((ROOT / "README.md").read_text())
    assert '"ingest.raw"' in code and '"127.0.0.1:9092"' in code, code
    (etype,) = re.findall(r'"type": "([^"]+)"', code)
    code = code.replace('"ingest.raw"', f'"{raw_topic}"').replace(
        '"127.0.0.1:9092"', f'"{bootstrap}"'
    )
    return code, etype


async def _run_snippet(code: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


async def test_the_readme_snippet_twice_starts_one_run(cfg, topics, temporal, db_pool):
    bootstrap = cfg.kafka.bootstrap_servers
    code, etype = _snippet(topics.raw, bootstrap)
    aid = await db.seed_activity(db_pool, etype)
    await _run_snippet(code)
    await _run_snippet(code)
    dups_before = metrics.router_duplicates(missing_ok=True)

    tag = uuid.uuid4().hex[:8]
    shutdown = Shutdown()
    rcfg = RouterSettings(group=f"rt-{tag}", commit_interval_ms=100)
    tasks = [
        asyncio.create_task(
            run_ingress(cfg, shutdown, config=IngressSettings(group=f"ing-{tag}"), serve=False)
        ),
        asyncio.create_task(
            Router(cfg, rcfg, client=temporal, pool=db_pool, shutdown=shutdown).run()
        ),
        asyncio.create_task(
            run_worker(
                cfg, shutdown, client=temporal, pool=db_pool, worker_settings=WorkerSettings()
            )
        ),
    ]
    try:

        async def both_routed_and_run() -> bool:
            events = await kafka.count(bootstrap, topics.events)
            done = await db_pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
            )
            return (
                events == 2
                and done >= 1
                and await kafka.caught_up(bootstrap, rcfg.group, topics.events)
            )

        await wait.eventually(both_routed_and_run, 120, "both messages routed and the run done")
        runs = await wait.quiet(
            lambda: db_pool.fetchval("SELECT count(*) FROM activity_runs"), "activity_runs"
        )
    finally:
        shutdown.trigger()
        codes = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert codes[0] == 0 and codes[2] == 0  # ingress, worker (the router returns None)

    routed = await db_pool.fetch("SELECT workflow_id, event_id FROM routed_triggers")
    assert runs == 1 and len(routed) == 1, (runs, routed)
    (event_id,) = {r["event_id"] for r in routed}
    assert routed[0]["workflow_id"] == ids.event_workflow_id(aid, event_id)
    assert await exists(temporal, ids.event_workflow_id(aid, event_id))
    assert metrics.router_duplicates() - dups_before == 1
