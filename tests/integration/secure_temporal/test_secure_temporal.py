"""The real Temporal server secured (``ingest stack up --secure --temporal server``), for
real: the pipeline's own client (``pipeline.clients.temporal_client``) runs a workflow
over mutual TLS with a JWT as ``TEMPORAL_API_KEY``, and every way in without the right
certificate or token fails: at start-up (``Unreachable``, one line naming
``TEMPORAL_ADDRESS``, with the TLS or authorization error) or, without a token or with one
that does not cover the namespace, on the first call (``PERMISSION_DENIED``). Also the
``temporal`` CLI with the variables ``up --secure`` prints, and ``ingest worker`` with a
wrong CA.

One secured private server per session (``conftest.secure_server``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from devstack import temporal_secure
from devstack.certs import CertFiles, Pki
from devstack.secure import pki
from devstack.temporal_server import TemporalServer
from temporalio import workflow
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)
from temporalio.service import RPCError, RPCStatusCode, TLSConfig
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from pipeline.clients import Unreachable, temporal_client
from pipeline.settings import TemporalSettings
from tests.support import ROOT
from tests.support.process import clean_env
from tests.support.temporal_server import secured_settings

pytestmark = [pytest.mark.server_only, pytest.mark.temporal_server]


@workflow.defn(name="SecureHello")
class SecureHello:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


async def _start(client: Client) -> None:
    await client.start_workflow(
        SecureHello.run, "x", id=f"secure-{uuid.uuid4()}", task_queue=f"tq-{uuid.uuid4()}",
        execution_timeout=timedelta(seconds=30),
    )  # fmt: skip


async def _refused(cfg: TemporalSettings) -> str:
    """The start-up error of the pipeline's client for ``cfg`` (it must fail)."""
    with pytest.raises(Unreachable) as err:
        await temporal_client(cfg, timeout=5)
    text = str(err.value)
    assert f"TEMPORAL_ADDRESS={cfg.address}" in text, text
    assert "\n" not in text, text  # one line
    return text


def _alert(text: str, alert: str) -> None:
    """The server's TLS alert (``received fatal alert: <alert>``). With TLS 1.3 it refuses
    a client certificate after the client's side of the handshake is done, so the alert
    races the close: the SDK may see only the connection closed (or a broken pipe) on its
    first call. Measured (2026-12-06): of 20 tries without a certificate and 20 with one of
    another CA, 39 saw only the close."""
    closed = ("connection closed", "broken pipe")
    assert f"fatal alert: {alert}" in text or any(c in text for c in closed), text


async def test_the_pipeline_client_runs_a_workflow_over_mtls_with_a_jwt(secure_server):
    client = await temporal_client(secured_settings(secure_server))
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client, task_queue=queue, workflows=[SecureHello],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        result = await client.execute_workflow(
            SecureHello.run, "mtls", id=f"secure-{uuid.uuid4()}", task_queue=queue,
            execution_timeout=timedelta(seconds=60),
        )  # fmt: skip
    assert result == "hello mtls"


async def test_the_servers_own_worker_service_still_runs_schedules(secure_server):
    # Schedules run in the server's worker service, which reaches the frontend through the
    # internal frontend (internode mTLS, no JWT): a first action proves that path works.
    client = await temporal_client(secured_settings(secure_server))
    sid = f"secure-{uuid.uuid4()}"
    action = ScheduleActionStartWorkflow(
        "SecureHello", "scheduled", id=f"{sid}-wf", task_queue=f"tq-{uuid.uuid4()}"
    )
    every = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))])
    handle = await client.create_schedule(sid, Schedule(action=action, spec=every))
    try:
        for _ in range(60):
            info = (await handle.describe()).info
            if info.recent_actions:
                break
            await asyncio.sleep(0.5)
        assert info.recent_actions, info
    finally:
        await handle.delete()
    for done in info.recent_actions:  # its runs have no worker: leave none running
        assert isinstance(done.action, ScheduleActionExecutionStartWorkflow)
        await client.get_workflow_handle(done.action.workflow_id).terminate()


async def test_no_client_certificate_is_refused(secure_server):
    cfg = secured_settings(secure_server, tls_client_cert_path=None, tls_client_key_path=None)
    _alert(await _refused(cfg), "CertificateRequired")


async def test_a_client_certificate_of_another_ca_is_refused(secure_server, tmp_path):
    other = Pki(tmp_path / "other-ca", name="not the stack's CA").client("intruder")
    cfg = secured_settings(
        secure_server, tls_client_cert_path=other.cert, tls_client_key_path=other.key
    )
    _alert(await _refused(cfg), "UnknownCA")


async def test_an_expired_client_certificate_is_refused(secure_server):
    now = dt.datetime.now(dt.UTC)
    old = pki(secure_server.cfg).issue(
        "expired-client", (), days=1, not_before=now - dt.timedelta(days=10), client=True
    )
    cfg = secured_settings(
        secure_server, tls_client_cert_path=old.cert, tls_client_key_path=old.key
    )
    _alert(await _refused(cfg), "CertificateExpired")


async def test_a_plaintext_client_is_refused(secure_server):
    cfg = TemporalSettings(address=secure_server.address, namespace="default", tls=False)
    await _refused(cfg)


async def test_a_wrong_server_ca_is_refused(secure_server, tmp_path):
    other = Pki(tmp_path / "other-ca", name="not the stack's CA")
    text = await _refused(secured_settings(secure_server, tls_server_ca_cert_path=other.ca_cert))
    assert "UnknownIssuer" in text, text


async def test_without_a_jwt_the_client_connects_but_may_not_start(secure_server):
    # Health checks and GetSystemInfo need no token (the default authorizer lets them
    # through), so the connection opens; every namespace call is refused.
    client = await temporal_client(secured_settings(secure_server, permissions=None))
    with pytest.raises(RPCError) as err:
        await _start(client)
    assert err.value.status == RPCStatusCode.PERMISSION_DENIED, err.value
    assert "unauthorized" in str(err.value).lower(), err.value


@pytest.mark.parametrize("forged", ["unknown kid", "our kid, another key"])
async def test_a_jwt_signed_by_an_unknown_key_is_refused(secure_server, forged):
    theirs = ec.generate_private_key(ec.SECP256R1())
    ours = temporal_secure.key_id(temporal_secure.signing_key(secure_server.cfg))
    token = temporal_secure.mint(
        theirs, [temporal_secure.SYSTEM_ADMIN], kid=ours if forged.startswith("our") else None
    )
    text = await _refused(secured_settings(secure_server, api_key=token))
    # A token that fails to verify is refused on the first call, GetSystemInfo included.
    assert "PermissionDenied" in text and "Request unauthorized" in text, text


async def test_an_expired_jwt_is_refused(secure_server):
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    token = temporal_secure.token(secure_server.cfg, ["default:admin"], now=old)
    assert "PermissionDenied" in await _refused(secured_settings(secure_server, api_key=token))


@pytest.mark.parametrize("permissions", [["elsewhere:admin"], ["default:read"]])
async def test_a_jwt_without_write_on_the_namespace_may_not_start(secure_server, permissions):
    client = await temporal_client(secured_settings(secure_server, permissions=permissions))
    with pytest.raises(RPCError) as err:
        await _start(client)
    assert err.value.status == RPCStatusCode.PERMISSION_DENIED, err.value
    if permissions == ["default:read"]:  # reading is what it may do
        assert (await client.count_workflows()).count >= 0  # no error: allowed


async def test_the_internal_frontend_refuses_the_stacks_client_certificate(secure_server):
    # The internal frontend treats every caller as the server (system admin, no JWT): it
    # listens with internode TLS, whose CA is not the one that issues client certificates.
    cfg = secure_server.cfg
    port = temporal_secure.internal_frontend_port(cfg)

    def tls(cert: CertFiles) -> TLSConfig:
        return TLSConfig(
            server_root_ca_cert=temporal_secure.internode_pki(cfg).ca_cert.read_bytes(),
            client_cert=cert.cert.read_bytes(),
            client_private_key=cert.key.read_bytes(),
            domain=temporal_secure.SERVER_NAME,
        )

    with pytest.raises(RuntimeError):
        await Client.connect(f"127.0.0.1:{port}", tls=tls(temporal_secure.client_cert(cfg)))
    # The control: the internode certificate opens it, and no token is asked for.
    inside = await Client.connect(f"127.0.0.1:{port}", tls=tls(temporal_secure.internode_cert(cfg)))
    assert (await inside.count_workflows()).count >= 0  # no error: allowed


def test_the_http_api_requires_a_client_certificate_and_a_token(secure_server):
    cfg = secure_server.cfg
    cert = temporal_secure.client_cert(cfg)
    url = f"https://127.0.0.1:{cfg.temporal_port + 10}/api/v1/namespaces/default/workflows"
    ctx = ssl.create_default_context(cafile=str(cert.ca))
    with pytest.raises(httpx.TransportError, match="CERTIFICATE_REQUIRED"):
        httpx.get(url, verify=ctx, timeout=5)
    ctx.load_cert_chain(str(cert.cert), str(cert.key))
    with httpx.Client(verify=ctx, timeout=5) as h:
        assert h.get(url).status_code == 403
        token = temporal_secure.token(cfg, ["default:read"])
        ok = h.get(url, headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200, ok.text


def _temporal_cli() -> str:
    return str(Path(sys.executable).parent / "temporal")


def test_the_temporal_cli_works_with_the_printed_variables(secure_server):
    cfg = secure_server.cfg
    env = temporal_secure.client_env(cfg, api_key=temporal_secure.token(cfg, ["default:read"]))
    argv = [_temporal_cli(), "workflow", "list", "--limit", "1"]
    ok = subprocess.run(argv, env=clean_env(**env), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    env.pop("TEMPORAL_API_KEY")
    denied = subprocess.run(argv, env=clean_env(**env), capture_output=True, text=True, timeout=60)
    assert denied.returncode != 0
    assert "unauthorized" in (denied.stdout + denied.stderr).lower(), denied.stderr


def test_ingest_worker_with_a_wrong_ca_exits_naming_the_setting(secure_server, tmp_path):
    cfg = secure_server.cfg
    env = temporal_secure.client_env(cfg, api_key=temporal_secure.token(cfg, ["default:write"]))
    env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"] = str(Pki(tmp_path / "other").ca_cert)
    res = subprocess.run(
        [sys.executable, "-m", "app.commands", "worker", "--metrics-port", "0"],
        cwd=ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode != 0, res.stdout + res.stderr
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "TEMPORAL_" in ln]
    assert len(lines) == 1, res.stdout + res.stderr
    assert f"TEMPORAL_ADDRESS={secure_server.address}" in lines[0], lines[0]


def test_the_secured_server_says_so(secure_server: TemporalServer):
    assert secure_server.secured() and secure_server.answering()
    assert "TLS, client certificates required, JWT" in secure_server.summary()
