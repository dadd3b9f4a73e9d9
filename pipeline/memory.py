"""Giving freed memory back to the system: glibc's ``malloc_trim`` on a timer.

Why: a backlog raises a process's heap (after a network fault the worker holds hundreds
of workflows at once), and once it drains, Python's objects are back where they were but
the allocator keeps what they used. The soak measured it in the worker
(``SOAK_MEMPROBE``, docs/soak.md "Where the worker's memory goes"): after a 60-s latency
toxic, glibc's heaps held 25-33 MB more *free* bytes than before, all of it counted in the
RSS, so each larger backlog ratcheted the RSS up. glibc gives memory back on its own only
from the top of the main heap; ``malloc_trim(0)`` also releases every whole free page
inside every arena (the SDK's Rust threads have arenas of their own).

:func:`setup` starts a daemon thread that calls it every ``INGEST_MALLOC_TRIM_SECONDS``
(60; 0 turns it off). ctypes releases the GIL for the call, which takes milliseconds;
each call adds what the RSS dropped by to ``pipeline_memory_trimmed_bytes_total``. On a
C library without ``malloc_trim`` (musl, macOS) it logs that once and does nothing.

What it cannot reach: pymalloc's arenas (Python's own small-object allocator) are given
back only when wholly empty; the soak saw about 10 MB of them kept after a backlog.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import cache

from prometheus_client import Counter

log = logging.getLogger(__name__)

TRIMMED = Counter(
    "pipeline_memory_trimmed_bytes_total",
    "Resident bytes given back to the system by malloc_trim (pipeline/memory.py).",
)
_PAGE = os.sysconf("SC_PAGE_SIZE")


@cache
def _libc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None when this C library has none (looked up once)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def rss() -> int:
    """This process's resident set in bytes (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def trim() -> int:
    """Give the allocator's free pages back now; returns the RSS it dropped by (0 when
    nothing could be trimmed, or without glibc)."""
    fn = _libc_trim()
    if fn is None:
        return 0
    before = rss()
    fn(0)
    dropped = max(0, before - rss())
    TRIMMED.inc(dropped)
    return dropped


def setup(seconds: float, process: str) -> threading.Thread | None:
    """Trim every ``seconds`` from a daemon thread (0: never); the thread, or None."""
    if seconds <= 0:
        return None
    if _libc_trim() is None:
        log.info("%s: no malloc_trim in this C library: nothing to trim", process)
        return None

    def loop() -> None:
        while True:
            time.sleep(seconds)
            try:
                trim()
            except OSError as exc:  # /proc unreadable: say so once, stop trying
                log.warning("%s: memory trim stopped: %s", process, exc)
                return

    thread = threading.Thread(target=loop, name="malloc-trim", daemon=True)
    thread.start()
    return thread
