"""Jars from Maven: the runtime dependencies of a tiny pom, copied into a folder once.

What the local Kafka runs on (:meth:`devstack.kafka.Kafka.libs`), and the
Temporal test server of the time-skipping tests (``tests/support/time_skipping.py``).
A ``.complete`` marker makes a half-finished copy (an interrupted fetch) fetch again.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from devstack.procs import StackError


def copy_jars(pom: Path, pom_xml: str, libs: Path, what: str, hint: str) -> Path:
    """``libs``, holding the runtime jars of what ``pom_xml`` names (written to ``pom``).

    ``what`` names the jars and ``hint`` what to check in the error of a failed fetch.
    """
    if (libs / ".complete").exists():
        return libs
    if shutil.which("mvn") is None:
        raise StackError(
            f"Maven (mvn) is needed to fetch {what}: install it "
            "(Debian: apt-get install maven) and run again"
        )
    pom.parent.mkdir(parents=True, exist_ok=True)
    pom.write_text(pom_xml)
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        "-DincludeScope=runtime",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise StackError(
            f"fetching {what} with Maven failed ({hint}):\n{(res.stdout + res.stderr)[-2000:]}"
        )
    (libs / ".complete").write_text("ok\n")
    return libs
