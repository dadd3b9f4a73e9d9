"""Where a soak process's memory is (``SOAK_MEMPROBE``; ``docs/soak.md``, "Where the
worker's memory goes").

Python imports a ``sitecustomize`` module at start-up from ``sys.path``; the soak puts
this folder on ``PYTHONPATH`` of the kinds ``SOAK_MEMPROBE`` names, with
``MEMPROBE_OUT`` set. A daemon thread then appends one JSON line to that file every
``MEMPROBE_EVERY`` seconds:

* ``rss``: the resident set (``/proc/self/statm``);
* ``py_*``: pymalloc's arenas, the bytes in its used and its free blocks
  (``sys._debugmallocstats``, read through a pipe on fd 2);
* ``malloc_*``: glibc's heap (``mallinfo2``): ``used`` (what C and Rust code, and Python's
  objects over 512 bytes, hold), ``free`` (freed, kept by the allocator), ``mmap``;
* ``objects``: the live objects the garbage collector tracks, by type (top 25);
* with ``MEMPROBE_FRAMES`` > 0, ``tracemalloc`` (started here, that many frames):
  ``traced`` and the top 25 source lines by growth since the first line;
* with ``MEMPROBE_GC_FREEZE_AFTER`` > 0 (s; pass it with ``SOAK_PIPELINE_ENV``), an
  experiment: one ``gc.collect()`` and ``gc.freeze()`` that long after start-up, and a line
  ``{"frozen": N}`` (docs/soak.md, "Three more levers").

Nothing here runs unless ``MEMPROBE_OUT`` is set. It is a diagnostic of the soak, never
loaded by the pipeline in production.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import re
import sys
import threading
import time
import tracemalloc
from typing import Any


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _malloc() -> dict[str, int]:
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    m = libc.mallinfo2()
    return {
        "malloc_heap": m.arena,
        "malloc_used": m.uordblks,
        "malloc_free": m.fordblks,
        "malloc_mmap": m.hblkhd,
    }


_PY = {
    "py_arenas": re.compile(rb"# arenas allocated current\s*=\s*([\d,]+)"),
    "py_used": re.compile(rb"# bytes in allocated blocks\s*=\s*([\d,]+)"),
    "py_free": re.compile(rb"# bytes in available blocks\s*=\s*([\d,]+)"),
}


def _pymalloc() -> dict[str, int]:
    """``sys._debugmallocstats`` writes to the C stderr: catch it through a pipe."""
    read, write = os.pipe()
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(write, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read()
    out = {}
    for name, pattern in _PY.items():
        found = pattern.search(text)
        out[name] = int(found.group(1).replace(b",", b"")) if found else -1
    return out


def _objects(top: int = 25) -> dict[str, int]:
    counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    return dict(counts.most_common(top))


class _Probe:
    def __init__(self, out: str, every: float, frames: int) -> None:
        self.out, self.every, self.frames = out, every, frames
        self.first: tracemalloc.Snapshot | None = None
        if frames > 0:
            tracemalloc.start(frames)

    def line(self) -> dict[str, Any]:
        from pipeline.memory import rss  # the project's own reading (imported on use)

        row: dict[str, Any] = {"t": time.time(), "pid": os.getpid(), "rss": rss()}
        row.update(_pymalloc())
        row.update(_malloc())
        row["objects"] = _objects()
        if self.frames > 0:
            row["traced"] = tracemalloc.get_traced_memory()[0]
            snap = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]
            )
            if self.first is None:
                self.first = snap
            row["growth"] = [
                [str(s.traceback), s.size_diff, s.count_diff]
                for s in snap.compare_to(self.first, "traceback")[:25]
            ]
        return row

    def run(self) -> None:
        while True:
            time.sleep(self.every)
            try:
                row = self.line()
            except Exception as exc:  # a diagnostic must never take its process down
                row = {"t": time.time(), "pid": os.getpid(), "error": repr(exc)}
            with open(self.out, "a") as f:
                f.write(json.dumps(row) + "\n")


def _freeze(out: str, after: float) -> None:
    """The ``MEMPROBE_GC_FREEZE_AFTER`` experiment: freeze what start-up left alive."""
    time.sleep(after)
    gc.collect()
    gc.freeze()
    row = {"t": time.time(), "pid": os.getpid(), "frozen": gc.get_freeze_count()}
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


def _start() -> None:
    out = os.environ.get("MEMPROBE_OUT")
    if not out:
        return
    probe = _Probe(
        out,
        float(os.environ.get("MEMPROBE_EVERY", "30")),
        int(os.environ.get("MEMPROBE_FRAMES", "0")),
    )
    threading.Thread(target=probe.run, name="memprobe", daemon=True).start()
    freeze_after = float(os.environ.get("MEMPROBE_GC_FREEZE_AFTER", "0"))
    if freeze_after > 0:
        threading.Thread(
            target=_freeze, args=(out, freeze_after), name="memprobe-freeze", daemon=True
        ).start()


_start()
