"""Compose: services, image, env vars known to the settings classes; the Dockerfile."""

from __future__ import annotations

import re
import shutil
import tomllib

import pytest

from tests.unit.deploy.assets import (
    DEPLOY,
    METRICS_PORT,
    ROOT,
    SDK_METRICS_PORT,
    _compose,
    _run,
    known_env_vars,
)

APP_SERVICES = ("ingress", "router", "worker", "migrate")


def test_compose_services() -> None:
    services = _compose()["services"]
    for name in (
        "kafka",
        "postgresql",
        "temporal",
        "temporal-ui",
        "prometheus",
        "grafana",
        *APP_SERVICES,
    ):
        assert name in services, name
    assert services["kafka"]["image"] == "apache/kafka:4.1.1"
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["postgresql"]["image"] == "postgres:16"
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert "./prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    images = {services[s]["image"] for s in APP_SERVICES}
    assert len(images) == 1, "ingress/router/worker/migrate must run one image"
    for name in APP_SERVICES:
        svc = services[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
        assert svc["command"] == [name]
        assert svc["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert svc["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert svc["environment"]["DATABASE_URL"].startswith("postgresql://")
    for name in ("ingress", "router", "worker"):
        deps = services[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert str(METRICS_PORT) in " ".join(services[name]["healthcheck"]["test"])
    assert services["worker"]["environment"]["INGEST_SDK_METRICS_PORT"] == str(SDK_METRICS_PORT)


def test_compose_env_vars_are_read_by_settings() -> None:
    known = known_env_vars()
    unknown = {
        f"{name}: {var}"
        for name in APP_SERVICES
        for var in _compose()["services"][name]["environment"]
        if var not in known
    }
    assert not unknown


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and _run(docker, "compose", "version").returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_config_validates() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    proc = _run(*cli, "-f", "deploy/compose.yaml", "config", "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_preloads_jemalloc_it_installs_after_pip_ran() -> None:
    """The image runs every process on jemalloc (docs/operating.md): the preloaded path is
    the link the image makes, checked at build time, and set only after ``pip install``
    (pip itself runs on glibc). ld.so only warns about a missing preload, so a wrong path
    would run glibc silently."""
    text = (DEPLOY / "Dockerfile").read_text()
    env = re.search(r"^ENV LD_PRELOAD=(\S+) \\\n\s+PYTHONMALLOC=malloc$", text, re.M)
    assert env, "ENV LD_PRELOAD=... PYTHONMALLOC=malloc"
    link = env.group(1)
    assert re.search(rf"ln -s \S.*libjemalloc\.so\.2.* {re.escape(link)} ", text)
    assert f"test -e {link}" in text
    assert "libjemalloc2" in text
    assert text.index("RUN pip install .") < env.start()


def test_dockerfile() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    assert re.search(r"^RUN pip install \.", text, re.M)
    assert 'ENTRYPOINT ["ingest"]' in text
    assert re.search(r"^COPY \. \.$", text, re.M), "copy the (dockerignore-filtered) repo root"
    ignored = {
        line.strip().removeprefix("**/").rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", "README.md"}
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        needed.add(pattern.rstrip("*").rstrip("."))
    assert not needed & ignored, f"Dockerfile.dockerignore excludes {needed & ignored}"
