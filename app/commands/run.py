"""``ingest run``: every pipeline process in the foreground, for the local stack.

Starts ``ingest ingress``, ``ingest router``, ``ingest worker``, ``ingest ops`` and
``ingest relay`` (which publishes the outbox of ``emit`` tasks)
as child processes (each on its own metrics port; ops with ``--insecure-local``
and a token made for this run when ``INGEST_OPS_TOKEN`` is unset: only 127.0.0.1
can reach it, and the console URL printed with the token is the way in), prefixes
their log lines with the component name, and on Ctrl-C / SIGTERM forwards
SIGTERM to each so they drain and commit, then exits 0. If one child dies, the
others are stopped too and the exit code is non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from importlib import resources

from app.command import Command
from pipeline.settings import METRICS_PORTS

# Each gets the /metrics port base + its index: 9400, 9401, 9402, 9403, 9404 by default, the
# same as each process's own default (pipeline.settings.METRICS_PORTS).
COMPONENTS = ["ingress", "router", "worker", "ops", "relay"]
# Package data (pyproject.toml), so an installed wheel has it too.
DEMO_FILE = resources.files("app") / "demo-activities.json"


async def _pump(name: str, stream: asyncio.StreamReader) -> None:
    width = max(len(n) for n in COMPONENTS)
    while line := await stream.readline():
        sys.stdout.write(f"{name:<{width}} | {line.decode(errors='replace')}")
        sys.stdout.flush()


async def _seed_demo() -> None:
    import orjson

    from definitions import store
    from pipeline import settings
    from pipeline.clients import db_pool
    from schemas.definitions import ActivityFile

    defs = ActivityFile.model_validate(orjson.loads(DEMO_FILE.read_bytes()))
    pool = await db_pool(settings.load_settings().database)
    try:
        await store.upsert(pool, defs.activities, keep_existing=True)
        for a in defs.activities:
            print(
                f"demo activity {a.id} ({a.name}) listens for "
                f"{getattr(a.trigger, 'event_type', a.trigger.type)!r}"
            )
    finally:
        await pool.close()


def _ops_local() -> tuple[list[str], dict[str, str], str | None]:
    """Flags and environment of the ops child, and the console URL to print: without
    ``INGEST_OPS_TOKEN``, a token made for this run (in the child's environment, so
    never in ``ps``), on 127.0.0.1 only."""
    if os.environ.get("INGEST_OPS_TOKEN"):
        return [], {}, None
    from ops.identity import console_url, new_local_token
    from ops.settings import LOCALHOST, load_ops_settings

    token = new_local_token()
    port = load_ops_settings(host=LOCALHOST).port
    print("ops: INGEST_OPS_TOKEN is unset: the console runs --insecure-local on 127.0.0.1 "
          "with a token made for this run (in the console link printed below)")  # fmt: skip
    flags = ["--insecure-local", "--host", LOCALHOST]
    link = console_url(LOCALHOST, port, token)
    if port == 0:  # a free port ops picks: the address is in its "ops API ... on" log line
        link = f"<the address ops logs>/#token={token}"
    return flags, {"INGEST_OPS_TOKEN": token}, link


async def _run(args: argparse.Namespace) -> int:
    if args.seed_demo:
        await _seed_demo()
    base_port = args.base_metrics_port
    procs: list[tuple[str, asyncio.subprocess.Process]] = []
    pumps = []
    ops_flags, ops_env, console = _ops_local()
    for i, name in enumerate(COMPONENTS):
        env = {**os.environ, "INGEST_METRICS_PORT": str(base_port + i)}
        extra = ops_flags if name == "ops" else []
        if name == "ops":
            env.update(ops_env)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.cli",
            name,
            *extra,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
        assert proc.stdout is not None
        procs.append((name, proc))
        pumps.append(asyncio.create_task(_pump(name, proc.stdout)))
        print(f"started {name} (pid {proc.pid}, metrics http://127.0.0.1:{base_port + i}/metrics)")
    if console is not None:
        print(f"ops console (open this link; the token in it is this run's): {console}")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waits = {asyncio.create_task(p.wait()): n for n, p in procs}
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*waits, stopper], return_when=asyncio.FIRST_COMPLETED)
    failed = [waits[t] for t in done if t in waits]
    if failed:
        print(f"{', '.join(failed)} exited; stopping the others", file=sys.stderr)
    else:
        print("stopping: SIGTERM to every component (they drain and commit)")
    for _, p in procs:
        if p.returncode is None:
            p.send_signal(signal.SIGTERM)
    codes = await asyncio.gather(*(p.wait() for _, p in procs))
    await asyncio.gather(*pumps, return_exceptions=True)
    return 1 if failed or any(codes) else 0


def _cmd(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed-demo",
        action="store_true",
        help=f"insert the demo activities from {DEMO_FILE.name} (idempotent)",
    )
    p.add_argument(
        "--base-metrics-port",
        type=int,
        default=METRICS_PORTS["ingress"],
        help="ingress gets this /metrics port, router +1, worker +2, ops +3, relay +4 (9400)",
    )


COMMAND = Command(
    "run",
    help="run ingress, router, worker, ops and relay together in the foreground",
    description=(
        "Run every pipeline process as a child with prefixed logs. Ctrl-C sends "
        "SIGTERM to each: they drain in-flight work, commit and exit."
    ),
    run=_cmd,
    flags=_flags,
)
