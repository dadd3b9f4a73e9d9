"""bench.common.stop: SIGTERM, the exit codes in order, a kill for one that will not go."""

from __future__ import annotations

import asyncio
import signal
import sys

from bench.common import stop


async def _python(code: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    await proc.stdout.readline()  # it is running its code (a handler installed, if any)
    return proc


async def test_stop_terminates_and_kills_what_ignores_the_terminate() -> None:
    polite = await _python("import time; print(flush=True); time.sleep(60)")
    stubborn = await _python(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print(flush=True); time.sleep(60)"
    )
    assert await stop([polite, stubborn], kill_after=1.0) == [-signal.SIGTERM, -signal.SIGKILL]


async def test_stop_leaves_an_exited_process_its_code() -> None:
    done = await _python("print(flush=True); raise SystemExit(3)")
    await done.wait()
    assert await stop([done], kill_after=None) == [3]
