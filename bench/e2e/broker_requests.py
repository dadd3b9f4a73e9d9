"""Broker requests per run: where the broker's share of a phase's CPU goes (issue 40 §3).

Kafka counts every request it serves per API (``kafka.network:type=RequestMetrics,
name=RequestsPerSec,request=<API>,version=<n>``, attribute ``Count``). The stack's broker
runs without a JMX port, so :func:`open_jmx` starts the JVM's own management agent in the
running broker (``jcmd <pid> ManagementAgent.start``, a JDK tool: Debian's
``openjdk-17-jdk-headless``; loopback, no restart) and :class:`BrokerRequests` reads the
counts with Kafka's own ``org.apache.kafka.tools.JmxTool`` from the broker's jars, before
and after a phase: ``per_run`` is each API's requests divided by the phase's runs
(Fetch, Produce, OffsetCommit, Heartbeat, Metadata, ...), the figure the cuts aim at.

Only the broker's view: the requests of every client (the pipeline's, the benchmark's
producer, the stack's other users) are counted; nothing else should run meanwhile.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

OBJECT = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
_REQUEST = re.compile(r"request=([A-Za-z]+)")
SUBDIVISIONS = {"FetchConsumer", "FetchFollower"}  # also counted under Fetch


class JmxUnavailable(RuntimeError):
    """The broker's counters cannot be read here (no JDK tool, no broker)."""


_PORT = re.compile(r"com\.sun\.management\.jmxremote\.port = (\d+)")


def open_jmx(pid: int, port: int) -> str:
    """Start the management agent of broker JVM ``pid`` on 127.0.0.1:``port`` (or keep the
    one a previous run started, on its port); the JMX service URL."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        raise JmxUnavailable("jcmd is missing: apt-get install openjdk-17-jdk-headless")
    status = subprocess.run(
        [jcmd, str(pid), "ManagementAgent.status"], capture_output=True, text=True
    ).stdout
    if (running := _PORT.search(status)) is not None:
        port = int(running.group(1))
        return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi"
    options = [
        f"jmxremote.port={port}",
        f"jmxremote.rmi.port={port}",
        "jmxremote.host=127.0.0.1",
        "jmxremote.authenticate=false",
        "jmxremote.ssl=false",
    ]
    res = subprocess.run(
        [jcmd, str(pid), "ManagementAgent.start", *options], capture_output=True, text=True
    )
    out = res.stdout + res.stderr
    if res.returncode != 0 or "Exception" in out:  # jcmd exits 0 on a command's error
        raise JmxUnavailable(f"jcmd {pid} ManagementAgent.start failed: {out.strip()[-500:]}")
    return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi"


def tools_classpath(libs: Path, tools: Path) -> str:
    """Kafka's tools run on the broker's jars plus the tools jar's folder
    (``devstack.kafka.Kafka.libs()`` and ``.tools()``)."""
    return f"{libs}/*:{tools}/*"


def parse(output: str) -> Counter[str]:
    """JmxTool's one-time CSV (a header of ``"object:Count"`` columns, one row of values)
    summed per API over its versions."""
    rows = [r for r in csv.reader(io.StringIO(output)) if r]
    header = next((r for r in rows if r and r[0].strip('"').lower() == "time"), None)
    if header is None:
        raise ValueError(f"no JmxTool header in {output[:300]!r}")
    values = rows[rows.index(header) + 1]
    counts: Counter[str] = Counter()
    for name, value in zip(header[1:], values[1:], strict=True):
        if (m := _REQUEST.search(name)) is not None and value:
            counts[m.group(1)] += int(float(value))
    return counts


@dataclass
class BrokerRequests:
    """Requests the broker served per API between :meth:`start` and :meth:`stop`."""

    classpath: str  # the broker's jars and Kafka's tools: :func:`tools_classpath`
    url: str  # from :func:`open_jmx`
    _before: Counter[str] = field(default_factory=Counter)

    def read(self) -> Counter[str]:
        res = subprocess.run(
            [
                shutil.which("java") or "java",
                "-cp",
                self.classpath,
                "org.apache.kafka.tools.JmxTool",
                "--jmx-url",
                self.url,
                "--object-name",
                OBJECT,
                "--attributes",
                "Count",
                "--one-time",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            raise JmxUnavailable(f"JmxTool failed: {(res.stdout + res.stderr).strip()[-500:]}")
        return parse(res.stdout)

    def start(self) -> None:
        self._before = self.read()

    def stop(self, runs: int) -> dict[str, float]:
        """Each API's requests per run (those with at least 0.05 per run), and ``total``."""
        delta = self.read() - self._before
        per_run = {api: round(n / runs, 2) for api, n in delta.most_common() if n / runs >= 0.05}
        # FetchConsumer and FetchFollower are the two kinds of Fetch, counted in it too.
        total = sum(n for api, n in delta.items() if api not in SUBDIVISIONS)
        per_run["total"] = round(total / runs, 2)
        return per_run
