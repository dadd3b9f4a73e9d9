"""``ingest replay``: re-route a range of a topic, or re-drive the DLQ, after an incident.

The work is in :mod:`replay.topic` and :mod:`replay.dlq`; this module parses flags, builds the
clients, draws a progress bar on a TTY and prints the summary (text or JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from dataclasses import fields
from datetime import datetime
from typing import TextIO

from app.command import Command
from app.flags import add_flags, overrides
from pipeline import logs, settings, tracing
from pipeline.clients import Unreachable, routing_clients
from pipeline.runtime import Shutdown
from replay.dlq import DLQ_GROUP
from replay.request import ReplayRequest, run_request
from replay.session import ReplayError, ReplayReport
from router.settings import RouterSettings, load_router_settings

log = logging.getLogger("replay")

_DESCRIPTION = """\
Replay a range of a topic through the router's own code path, without touching the
live router's consumer group: partitions are assigned manually, read from
--from-offset or --from-time up to the end offsets at start (or --to-time), and
every event is looked up in the dedupe ledger first, then started with
REJECT_DUPLICATE. Only what never ran is started, even after Temporal has forgotten
closed workflows (namespace retention).

--dlq re-drives the DLQ after a fix: ingress rejections go through ingress's
parse-and-stamp again (event_id derived from the original raw coordinates) to the
events topic; router rejections are routed again. Still-bad messages go back to the
DLQ with dlq_attempt + 1. Progress is kept in consumer group ingest-dlq-replay, so
a message is re-driven once."""


class ProgressBar:
    """``[#####.....]  45%  12,345/27,000  1,234/s  ETA 0:12`` on stderr, redrawn with \\r."""

    def __init__(self, stream: TextIO, label: str, every: float = 0.2) -> None:
        self.stream = stream
        self.label = label
        self.every = every
        self.t0 = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every and done < total:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-6)
        rate = done / elapsed
        frac = done / total if total else 1.0
        width = 30
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        eta = _clock((total - done) / rate) if rate > 0 and done < total else "-:--"
        self.stream.write(
            f"\r{self.label} [{bar}] {frac:4.0%} {done:,}/{total:,} {rate:,.0f}/s ETA {eta}  "
        )
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _iso(value: str) -> datetime:
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from None
    if dt.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} needs a time zone (e.g. Z or +00:00)")
    return dt


def _partitions(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in value.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of partitions: {value!r}") from None


def format_report(report: ReplayReport, dlq: bool) -> str:
    d = report.as_dict()
    lines = [
        f"{'DLQ re-drive' if dlq else 'replay'} of {d['topic']}"
        f"{' (dry run: nothing started or produced)' if d['dry_run'] else ''}"
        f"{'' if d['complete'] else ' (INCOMPLETE: interrupted or stalled)'}",
        f"  read                       {d.get('dlq_read', d['read']):>10,}",
        f"  already routed (ledger)    {d['already_routed_ledger']:>10,}",
        f"  already started (Temporal) {d['already_started_temporal']:>10,}",
        f"  newly started              {d['started']:>10,}",
        f"  skipped (flow control)     {d['skipped']:>10,}",
    ]
    if d["dry_run"]:
        lines.append(f"  would start                {d['would_start']:>10,}")
    lines += [
        f"  dead-lettered              {d['dlq']:>10,}",
        f"  unmatched (no subscriber)  {d['unmatched']:>10,}",
    ]
    if dlq:
        lines += [
            f"  re-stamped to events       {d['to_events']:>10,}",
            f"  back in the DLQ            {d['returned_to_dlq']:>10,}",
            f"  carried forward (--reason) {d['carried_forward']:>10,}",
        ]
    lines.append(f"  {d['elapsed_seconds']:.1f}s, {d['rate_per_second']:,.0f} messages/s")
    return "\n".join(lines)


def _request(args: argparse.Namespace) -> ReplayRequest:
    """What the flags ask for: each field of the request is the flag of the same name."""
    return ReplayRequest(**{f.name: getattr(args, f.name) for f in fields(ReplayRequest)})


async def _main(args: argparse.Namespace, cfg: settings.Settings, rcfg: RouterSettings) -> int:
    shutdown = Shutdown()
    shutdown.install()
    try:
        client, pool = await routing_clients(cfg)
    except Unreachable as exc:
        print(f"ingest replay: {exc}", file=sys.stderr)
        return 1
    bar = ProgressBar(sys.stderr, "DLQ" if args.dlq else "replay") if sys.stderr.isatty() else None
    try:
        report = await run_request(
            cfg,
            rcfg,
            _request(args),
            client=client,
            pool=pool,
            progress=bar,
            stopping=lambda: shutdown.requested,
        )
    except ReplayError as exc:
        print(f"ingest replay: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.close()
        await pool.close()
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        print(format_report(report, args.dlq))
    return 0 if report.complete else 1


def _run(args: argparse.Namespace) -> int:
    from pipeline.settings import ConfigError

    if args.dlq:
        if args.from_offset is not None or args.from_time or args.to_time or args.partitions:
            raise ConfigError("--dlq re-drives from the group's position; drop --from-*/--to-*")
    elif args.from_offset is None and args.from_time is None:
        raise ConfigError("give --from-offset N or --from-time ISO (or --dlq)")
    if args.reason and not args.dlq:
        raise ConfigError("--reason only applies to --dlq")
    cfg = settings.load_settings(
        **overrides(args, "dlq_topic", "events_topic", "task_queue"),
    )
    rcfg = load_router_settings(
        concurrency=args.concurrency, ledger=False if args.no_ledger else None
    )
    # Logs go to stderr; with --json keep them to warnings so stdout parses cleanly anyway.
    logs.setup("WARNING" if args.json else cfg.process.log_level, cfg.process.log_format, "replay")
    tracing.setup(cfg.process.tracing, "replay")
    return asyncio.run(_main(args, cfg, rcfg))


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", help="topic to replay (default KAFKA_EVENTS_TOPIC)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=int, metavar="N", help="first offset, per partition")
    start.add_argument("--from-time", type=_iso, metavar="ISO", help="first message at/after")
    p.add_argument("--to-time", type=_iso, metavar="ISO", help="stop before messages at/after")
    p.add_argument("--partitions", type=_partitions, metavar="0,1", help="only these partitions")
    p.add_argument("--dlq", action="store_true", help="re-drive the DLQ topic (KAFKA_DLQ_TOPIC)")
    p.add_argument("--reason", metavar="R", help="with --dlq: only messages with dlq_reason R")
    p.add_argument(
        "--group", default=DLQ_GROUP, help=f"with --dlq: progress group (default {DLQ_GROUP})"
    )
    p.add_argument("--dry-run", action="store_true", help="start and produce nothing; count")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--no-ledger", action="store_true", help="ask Temporal only (slower)")
    p.add_argument("--concurrency", type=int, help="concurrent starts (INGEST_ROUTER_CONCURRENCY)")
    add_flags(p, "events_topic", "dlq_topic", "task_queue")


COMMAND = Command(
    "replay",
    help="re-route a topic range or re-drive the DLQ; starts only what never ran",
    description=_DESCRIPTION,
    run=_run,
    flags=_flags,
    preformatted=True,
)
