"""``ingest router``'s ``/readyz`` tells the truth about PostgreSQL (issue 40): a real
router whose link to PostgreSQL goes half-open (Toxiproxy's ``timeout`` toxic: the data
is dropped, the socket stays open) answers 503 naming the lookup that retries, keeps
answering ``/healthz`` 200 (a restart would not help), and is ready again, with the
event routed, once the link works. Before ``DATABASE_COMMAND_TIMEOUT`` the lookup waited
on the dead link and ``/readyz`` stayed 200 throughout."""

from __future__ import annotations

import signal
import uuid
from urllib.parse import urlsplit

from schemas import ids
from tests.support import db, kafka, metrics, wait
from tests.support import toxiproxy as support
from tests.support.net import free_port
from tests.support.process import router_env, spawn_router
from tests.support.temporal import exists
from tests.support.toxiproxy import proxy_to, through

toxiproxy = support.toxiproxy  # the session fixture


async def test_readyz_is_503_while_postgres_is_half_open_and_200_after(
    cfg, temporal, db_pool, toxiproxy
):
    aid = await db.seed_activity(db_pool, "rz.t")
    tag = uuid.uuid4().hex[:8]
    url = cfg.database.url.get_secret_value()
    pg = urlsplit(url)
    port = free_port()
    with proxy_to(toxiproxy, f"{pg.hostname}:{pg.port}", "pg") as proxy:
        env = router_env(
            cfg,
            f"rz-{tag}",
            port,
            DATABASE_URL=through(url, proxy),
            DATABASE_COMMAND_TIMEOUT="2",
            INGEST_ROUTER_COMMIT_INTERVAL_MS="100",
        )
        router = await spawn_router(env)
        try:
            await wait.eventually(lambda: metrics.is_ready(port), 60, "the router to be ready")
            event_id = f"rz-{tag}"
            with support.toxic(toxiproxy, proxy, "timeout", {"timeout": 0}, stream="upstream"):
                await kafka.produce(
                    cfg.kafka.bootstrap_servers,
                    cfg.kafka.events_topic,
                    [(event_id.encode(), db.event("rz.t", event_id), [])],
                )
                seen: list[str] = []

                async def not_ready() -> bool:
                    status, body = await metrics.readyz(port)
                    seen.append(f"{status} {body.strip()}")
                    return status == 503

                if not await wait.wait_until(not_ready, 30):
                    raise AssertionError(f"/readyz never said 503 in 30 s; last: {seen[-3:]}")
                assert "not ready: ledger lookup retrying for" in seen[-1], seen[-1]
                assert "TimeoutError" in seen[-1], seen[-1]
                assert await metrics.healthy(port)  # alive: a restart would not help
            await wait.eventually(
                lambda: metrics.is_ready(port), 60, "the router to be ready again"
            )
            wid = ids.event_workflow_id(aid, event_id)
            await wait.eventually(lambda: exists(temporal, wid), 60, "the event's run")
        finally:
            router.send_signal(signal.SIGTERM)
            out, _ = await router.communicate()
    assert router.returncode == 0, out.decode()[-2000:]
