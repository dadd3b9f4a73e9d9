"""pipeline.memory: malloc_trim gives a heap's free pages back (on this machine's glibc),
the timer thread, and its setting."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pipeline import memory, settings
from tests.support import ROOT

# In a fresh interpreter: 60 MB of 4-KB chunks from glibc (below the mmap threshold, so
# they live in the heap), every page touched; all freed but every 64th, so the heap has
# live chunks to its top and cannot shrink on its own. Prints the RSS after the frees,
# what trim() said it dropped, the RSS after it, and the metric.
FRAGMENTED = textwrap.dedent(
    """
    import ctypes
    from pipeline import memory
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(4096) for _ in range(15000)]
    for c in chunks:
        ctypes.memset(c, 1, 4096)
    for i, c in enumerate(chunks):
        if i % 64:
            libc.free(c)
    before = memory.rss()
    dropped = memory.trim()
    after = memory.rss()
    print(before, dropped, after, memory.TRIMMED._value.get())
    """
)


def test_trim_gives_the_free_pages_of_a_fragmented_heap_back() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    before, dropped, after, counted = (float(x) for x in out.stdout.split())
    freed = 15000 * 4096 * 63 / 64  # about 60 MB freed into the heap
    # Without the trim the RSS stays (the heap cannot shrink: live chunks up to its top).
    assert before - after > 0.8 * freed, (before, after)
    assert dropped == before - after
    assert counted == dropped


def test_trim_without_free_pages_drops_nothing_it_cannot() -> None:
    assert memory.trim() >= 0


def test_setup_starts_a_daemon_thread_and_zero_turns_it_off() -> None:
    assert memory.setup(0, "test") is None
    thread = memory.setup(3600, "test")
    assert thread is not None and thread.daemon and thread.name == "malloc-trim"
    assert thread.is_alive()


def test_a_negative_interval_is_refused_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("INGEST_MALLOC_TRIM_SECONDS", "-1")
    with pytest.raises(settings.ConfigError, match="INGEST_MALLOC_TRIM_SECONDS"):
        settings.load_settings()
    monkeypatch.setenv("INGEST_MALLOC_TRIM_SECONDS", "0")
    assert settings.load_settings().process.malloc_trim_seconds == 0
