"""Kubernetes: probes on /healthz and /readyz (port 9400), resources, scrape
annotations, replicas within the partition count, kustomization, schema validation."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
import yaml

from tests.unit.deploy.assets import (
    K8S,
    METRICS_PORT,
    SDK_METRICS_PORT,
    _k8s_docs,
    _k8s_kind,
    _run,
    known_env_vars,
)


def _deployments() -> dict[str, dict[str, Any]]:
    """The pipeline's workloads by component: the worker's Deployment, and the
    StatefulSets of ingress and router (stable pod names for static group membership)."""
    return {
        d["metadata"]["name"].removeprefix("ingest-"): d
        for d in [*_k8s_kind("Deployment"), *_k8s_kind("StatefulSet")]
    }


def _configmap() -> dict[str, str]:
    (cm,) = _k8s_kind("ConfigMap")
    return cm["data"]  # type: ignore[no-any-return]


def _port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


@pytest.mark.parametrize("component", ["ingress", "router", "worker"])
def test_k8s_deployment(component: str) -> None:
    dep = _deployments()[component]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["args"] == [component]
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert live["path"] == "/healthz" and _port(container, live["port"]) == METRICS_PORT
    assert ready["path"] == "/readyz" and _port(container, ready["port"]) == METRICS_PORT
    res = container["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"]
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == str(METRICS_PORT)
    assert {"configMapRef": {"name": "ingest-config"}} in container["envFrom"]
    grace = float(_configmap()["INGEST_SHUTDOWN_GRACE_SECONDS"])
    assert spec["terminationGracePeriodSeconds"] > grace
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels["app.kubernetes.io/component"] == component
    env = {e["name"]: e for e in container.get("env", [])}
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "ingest-secrets"
    unknown = {n for n in env if n not in known_env_vars()}
    assert not unknown


@pytest.mark.parametrize("component", ["ingress", "router"])
def test_k8s_consumer_replicas_within_partitions(component: str) -> None:
    replicas = _deployments()[component]["spec"].get("replicas", 1)
    assert replicas <= int(_configmap()["KAFKA_PARTITIONS"])
    assert "partition" in (K8S / f"{component}.yaml").read_text().split("apiVersion")[0]


def test_k8s_worker_sdk_metrics_and_hpa() -> None:
    worker = _deployments()["worker"]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert _port(container, "sdk-metrics") == SDK_METRICS_PORT
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["INGEST_SDK_METRICS_PORT"] == str(SDK_METRICS_PORT)
    assert "replicas" not in worker["spec"], "the HPA owns the worker's replica count"
    (hpa,) = _k8s_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "ingest-worker",
    }
    assert any(m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])
    assert "type: External" in (K8S / "worker-hpa.yaml").read_text()


def test_k8s_pdbs_select_deployments() -> None:
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in _deployments().values()]
    pdbs = _k8s_kind("PodDisruptionBudget")
    assert pdbs
    for pdb in pdbs:
        selector = pdb["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), pdb


def test_k8s_configmap_secret_and_job() -> None:
    known = known_env_vars()
    assert not {k for k in _configmap() if k not in known}
    (secret,) = _k8s_kind("Secret")
    assert "DATABASE_URL" in secret["stringData"]
    assert not {k for k in secret["stringData"] if k not in known}
    text = (K8S / "secret.yaml").read_text()
    assert "TEMPORAL_API_KEY" in text and "KAFKA_SASL_PASSWORD" in text
    (job,) = _k8s_kind("Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")
    images = {
        c["image"]
        for d in [*_deployments().values(), job]
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert len(images) == 1


def test_k8s_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files


def test_k8s_schema() -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (pip install it)"
    )
    for path, doc in _k8s_docs():
        try:
            kv.validate(doc, kv.latest_version(), strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{path.name} {doc['kind']}: {exc.message}")


def test_kustomize_build() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is absent; `kubectl kustomize deploy/k8s` not run")
    proc = _run(kubectl, "kustomize", "deploy/k8s")
    assert proc.returncode == 0, proc.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(proc.stdout) if d]
    assert kinds.count("Deployment") == 1 and kinds.count("StatefulSet") == 2 and "Job" in kinds
