"""A private Prometheus server for a test: scrapes the processes the test started, with
the project's alert rules loaded, on a free port, and is stopped at the end.

Needs Debian's ``prometheus`` package (``/usr/bin/prometheus``). Without it a test
fails when ``CI=true`` (CI must run it) and is skipped elsewhere, saying what to
install.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import ROOT
from tests.support.net import free_port
from tests.support.wait import eventually

ALERT_RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
PACKAGE = "prometheus"  # the Debian package holding the server and promtool


def executable(name: str) -> str:
    """The path of ``name`` (``prometheus`` or ``promtool``); fails under CI=true when it
    is missing, skips elsewhere, and says which package installs it either way."""
    exe = shutil.which(name)
    if exe is None:
        why = f"{name} is missing: apt-get install -y {PACKAGE}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why} (CI=true: this test must run)", pytrace=False)
        pytest.skip(why)
    return exe


# Debian's prometheus package is built without Kubernetes service discovery, so its
# promtool cannot check deploy/prometheus/prometheus-k8s.yml. `make promtool-k8s` builds
# upstream's promtool once with `go install` (about 4-9 min on 2 cores, cached outside
# the checkout like the Temporal server): the version here and in the Makefile agree.
PROMTOOL_K8S_VERSION = "v0.316.0"  # the Go module version of Prometheus 3.x's promtool
PROMTOOL_K8S = Path.home() / ".cache" / "ingest" / "promtool" / PROMTOOL_K8S_VERSION / "promtool"


def promtool_with_kubernetes() -> str:
    """The promtool built with Kubernetes discovery; fails under CI=true when it is
    missing (``make test`` builds it), skips elsewhere, saying how to build it."""
    if PROMTOOL_K8S.exists():
        return str(PROMTOOL_K8S)
    why = f"{PROMTOOL_K8S} is missing: make promtool-k8s builds it"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: this test must run)", pytrace=False)
    pytest.skip(why)


@dataclass
class Prometheus:
    url: str

    async def _get(self, path: str, **params: str) -> Any:
        async with httpx.AsyncClient() as http:
            resp = await http.get(f"{self.url}{path}", params=params, timeout=10)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (``/api/v1/query``)."""
        data = await self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    async def samples(self, selector: str, window: str) -> list[tuple[dict[str, str], list[str]]]:
        """Every stored sample of ``selector`` in the last ``window``, per series (oldest first)."""
        data = await self._get("/api/v1/query", query=f"{selector}[{window}]")
        return [(r["metric"], [v for _, v in r["values"]]) for r in data["result"]]

    async def alerts(self, name: str) -> list[dict[str, Any]]:
        """The pending or firing alerts called ``name`` (``/api/v1/alerts``)."""
        data = await self._get("/api/v1/alerts")
        return [a for a in data["alerts"] if a["labels"]["alertname"] == name]

    async def scraped(self, job: str) -> bool:
        """Prometheus has scraped ``job`` successfully at least once."""
        return any(float(r["value"][1]) == 1 for r in await self.query(f'up{{job="{job}"}}'))


@contextlib.asynccontextmanager
async def prometheus(
    workdir: Path, targets: dict[str, int], interval: str = "1s"
) -> AsyncIterator[Prometheus]:
    """Prometheus scraping ``{job: metrics port on 127.0.0.1}`` every ``interval`` and
    evaluating ``deploy/prometheus/alerts.yml`` as often; stopped (SIGTERM) on exit."""
    exe = executable("prometheus")
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(ALERT_RULES)],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            for job, port in targets.items()
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        exe,
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
    )
    server = Prometheus(f"http://127.0.0.1:{port}")

    async def ready() -> bool:
        if proc.returncode is not None:
            raise AssertionError(
                f"prometheus exited {proc.returncode}: {(workdir / 'prometheus.log').read_text()}"
            )
        try:
            async with httpx.AsyncClient() as http:
                return (await http.get(f"{server.url}/-/ready", timeout=2)).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        await eventually(ready, 60, "the private Prometheus to be ready")
        yield server
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()
