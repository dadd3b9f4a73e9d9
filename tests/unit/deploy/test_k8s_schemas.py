"""The Kubernetes manifests as ``kubectl kustomize`` renders them, with and without the
optional KEDA component (deploy/k8s/keda), validated against real schemas:

* built-in kinds with ``kubernetes-validate`` (its bundled Kubernetes JSON schemas, in
  strict mode: an unknown field is an error, as ``kubectl apply --validate=strict``);
* KEDA's ScaledObject and TriggerAuthentication with the ``openAPIV3Schema`` of KEDA's
  own CRDs, made strict the same way, and each trigger's metadata keys against the
  fields KEDA's scaler parses (``keda:"name=..."`` tags in its Go source).

The KEDA files come from KEDA's Go module at :data:`KEDA_VERSION`, fetched once by
``make keda-schemas`` (a prerequisite of ``make test``) into ``~/.cache/ingest/keda``.
Also here: never two autoscalers on one workload, the router's KEDA bounds and settings
agree with the pipeline's, and static membership from the pod name.
"""

from __future__ import annotations

import copy
import re
import shutil
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate as kv
import pytest
import yaml

from pipeline import kafka
from pipeline.settings import KafkaSettings
from router.settings import RouterSettings
from tests.support import ROOT
from tests.unit.deploy.assets import K8S, _load_all, _run, known_env_vars

KEDA_VERSION = "v2.20.2"  # as KEDA_VERSION in the Makefile
KEDA_DIR = Path.home() / ".cache" / "ingest" / "keda" / KEDA_VERSION
KEDA_CRDS = {
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
}
SCALER_SOURCES = {"kafka": "kafka_scaler.go", "temporal": "temporal_scaler.go"}
# Triggers KEDA reads from the HPA's resource metrics, with no scaler source to parse.
RESOURCE_TRIGGERS = {"cpu": {"value"}, "memory": {"value"}}


def _keda_file(name: str) -> Path:
    path = KEDA_DIR / name
    if not path.exists():
        pytest.fail(f"{path} is missing: `make keda-schemas` fetches it", pytrace=False)
    return path


def _render(with_keda: bool) -> list[dict[str, Any]]:
    """``kubectl kustomize deploy/k8s``; with KEDA, of a copy whose kustomization lists the
    component as the commented lines in kustomization.yaml say to."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is missing: it renders the kustomization", pytrace=False)
    with tempfile.TemporaryDirectory() as tmp:
        root = K8S
        if with_keda:
            root = Path(tmp) / "k8s"
            shutil.copytree(K8S, root)
            text = (root / "kustomization.yaml").read_text()
            enabled = text.replace("# components:\n#   - keda\n", "components:\n  - keda\n")
            assert enabled != text, "kustomization.yaml no longer shows how to enable keda"
            (root / "kustomization.yaml").write_text(enabled)
        proc = _run(kubectl, "kustomize", str(root))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@cache
def _rendered(with_keda: bool) -> tuple[dict[str, Any], ...]:
    return tuple(_render(with_keda))


def _strict(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` on every object that lists its
    properties and does not declare extra ones allowed (what the API server prunes, or
    rejects under strict field validation)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def _crd_validator(kind: str) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load(_keda_file(KEDA_CRDS[kind]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    # A CRD's schema leaves out what every object has; the API server checks these.
    schema["properties"]["apiVersion"]["enum"] = [f"{crd['spec']['group']}/{version['name']}"]
    schema["properties"]["metadata"] = {"type": "object"}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "spec"})
    return jsonschema.Draft202012Validator(schema)


@cache
def _scaler_fields(trigger: str) -> frozenset[str]:
    """The metadata keys KEDA's scaler parses: each ``keda:"name=..."`` field, and its
    ``...FromEnv`` form when read from the target's environment (``resolvedEnv``)."""
    names: set[str] = set()
    source = _keda_file(SCALER_SOURCES[trigger]).read_text()
    for tag in re.findall(r'keda:"([^"]*)"', source):
        parts = {p.strip().split("=")[0]: p.strip() for p in tag.split(",")}
        name = parts["name"].split("=", 1)[1]
        if "triggerMetadata" in parts.get("order", ""):
            names.add(name)
        if "resolvedEnv" in parts.get("order", ""):
            names.add(f"{name}FromEnv")
    assert names, f"no keda tags found in {SCALER_SOURCES[trigger]}"
    return frozenset(names)


def schema_problems(doc: dict[str, Any]) -> list[str]:
    """Every way ``doc`` breaks its schema (empty: valid)."""
    kind = doc.get("kind", "?")
    if kind in KEDA_CRDS:
        problems = [
            f"{kind} {'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _crd_validator(kind).iter_errors(doc)
        ]
        for i, trig in enumerate(doc.get("spec", {}).get("triggers", [])):
            allowed = RESOURCE_TRIGGERS.get(trig["type"]) or _scaler_fields(trig["type"])
            problems += [
                f"{kind} spec.triggers.{i}.metadata: KEDA's {trig['type']} scaler has no {k!r}"
                for k in trig.get("metadata", {})
                if k not in allowed
            ]
        return problems
    try:
        kv.validate(doc, kv.latest_version(), strict=True)
    except kv.ValidationError as exc:
        return [f"{kind} {'.'.join(map(str, exc.path))}: {exc.message}"]
    return []


def _docs() -> Iterator[tuple[str, dict[str, Any]]]:
    for with_keda in (False, True):
        for doc in _rendered(with_keda):
            yield f"{'with keda' if with_keda else 'base'}:", doc


def test_rendered_manifests_match_their_schemas() -> None:
    problems = [f"{where} {p}" for where, doc in _docs() for p in schema_problems(doc)]
    assert not problems, "\n".join(problems)
    kinds = {doc["kind"] for _, doc in _docs()}
    assert {"StatefulSet", "Deployment", "ScaledObject", "TriggerAuthentication"} <= kinds


def test_keda_component_files_match_their_schemas() -> None:
    """Each file of the component on its own too (what a reader copies into an overlay)."""
    files = sorted((K8S / "keda").glob("*.yaml"))
    docs = [d for p in files if p.name != "kustomization.yaml" for d in _load_all(p)]
    assert {d["kind"] for d in docs} == set(KEDA_CRDS)
    problems = [p for d in docs for p in schema_problems(d)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("spec", "maxReplicaCounts"), 6, "maxReplicaCounts"),  # a misspelt field
        (("spec", "minReplicaCount"), "one", "'one' is not of type 'integer'"),
        (("spec", "triggers", 0, "metadata", "lagTreshold"), "10", "lagTreshold"),
    ],
)
def test_the_validator_rejects_a_wrong_scaledobject_field(
    path: tuple[Any, ...], value: Any, expected: str
) -> None:
    (router,) = [
        d
        for d in _rendered(True)
        if d["kind"] == "ScaledObject" and d["metadata"]["name"] == "ingest-router"
    ]
    broken = copy.deepcopy(router)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    problems = schema_problems(broken)
    assert any(expected in p for p in problems), problems


def test_the_validator_rejects_a_wrong_statefulset_field() -> None:
    (sts,) = [
        d
        for d in _rendered(False)
        if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "ingest-router"
    ]
    broken = copy.deepcopy(sts)
    broken["spec"]["strategy"] = broken["spec"].pop("updateStrategy")  # a Deployment's field
    assert any("strategy" in p for p in schema_problems(broken)), schema_problems(broken)


def _target(doc: dict[str, Any]) -> tuple[str, str]:
    ref = doc["spec"]["scaleTargetRef"]
    return ref.get("kind", "Deployment"), ref["name"]


@pytest.mark.parametrize("with_keda", [False, True])
def test_one_autoscaler_per_workload(with_keda: bool) -> None:
    docs = _rendered(with_keda)
    targets = [_target(d) for d in docs if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    assert len(targets) == len(set(targets)), targets
    workloads = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert set(targets) <= workloads, "an autoscaler targets no workload of the rendering"
    hpa = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    scaled = {_target(d) for d in docs if d["kind"] == "ScaledObject"}
    if with_keda:
        assert not hpa, "the keda component removes worker-hpa.yaml"
        assert scaled == {("StatefulSet", "ingest-router"), ("Deployment", "ingest-worker")}
        (router,) = [
            d
            for d in docs
            if d["metadata"]["name"] == "ingest-router" and d["kind"] == "StatefulSet"
        ]
        assert "replicas" not in router["spec"], "KEDA owns the router's replica count"
    else:
        assert [_target(d) for d in hpa] == [("Deployment", "ingest-worker")] and not scaled


async def test_router_scaling_agrees_with_the_pipeline() -> None:
    docs = _rendered(True)
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    objs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    router, worker = objs["ingest-router"], objs["ingest-worker"]
    text = (K8S / "keda" / "router-scaledobject.yaml").read_text()
    # At most one router per partition, and the file says why.
    assert router["spec"]["maxReplicaCount"] == int(cm["data"]["KAFKA_PARTITIONS"])
    assert "partition" in text.split("maxReplicaCount")[0].rsplit("\n\n", 1)[-1]
    (trigger,) = router["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "kafka"
    assert meta["consumerGroup"] == RouterSettings.model_fields["group"].default
    assert meta["topicFromEnv"] == "KAFKA_EVENTS_TOPIC"
    assert meta["allowIdleConsumers"] == "false"
    # KEDA counts a partition without a committed offset as the consumer would read it.
    consumer = kafka.consumer(KafkaSettings(), group_id="g")
    assert meta["offsetResetPolicy"] == consumer._auto_offset_reset == "earliest"
    assert int(meta["lagThreshold"]) >= RouterSettings.model_fields["max_poll_records"].default
    assert int(meta["activationLagThreshold"]) < int(meta["lagThreshold"])
    temporal = next(t for t in worker["spec"]["triggers"] if t["type"] == "temporal")
    env_refs = [
        v for t in (trigger, temporal) for k, v in t["metadata"].items() if k.endswith("FromEnv")
    ]
    assert env_refs and all(v in cm["data"] and v in known_env_vars() for v in env_refs)
    assert {"endpointFromEnv", "namespaceFromEnv", "taskQueueFromEnv"} <= temporal[
        "metadata"
    ].keys()


async def test_consumers_are_static_members_named_by_their_pod() -> None:
    for comp in ("ingress", "router"):
        (sts,) = [
            d
            for d in _rendered(False)
            if d["kind"] == "StatefulSet" and d["metadata"]["name"] == f"ingest-{comp}"
        ]
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        field = env["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "metadata.name"
        assert "StatefulSet" in (K8S / f"{comp}.yaml").read_text().split("apiVersion")[0]
    # What the variable does: a consumer in a group joins as that static member; one
    # without a group (peeks, reads by offset) never does; empty is dynamic.
    pod = KafkaSettings(group_instance_id="ingest-router-0")
    assert kafka.consumer(pod, group_id="ingest-router")._group_instance_id == "ingest-router-0"
    assert kafka.consumer(pod, group_id=None)._group_instance_id is None
    blank = KafkaSettings(group_instance_id="  ")
    assert kafka.consumer(blank, group_id="ingest-router")._group_instance_id is None


def test_makefile_fetches_the_version_the_test_reads() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert f"KEDA_VERSION := {KEDA_VERSION}\n" in makefile
    assert re.search(r"^test:.*\bkeda-schemas\b", makefile, re.M)
