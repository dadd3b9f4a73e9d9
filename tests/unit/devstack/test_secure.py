"""``ingest stack up --secure``: the broker's properties, PostgreSQL's pg_hba and options,
and what a client is told to set (no server is started here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from devstack import manager, secure
from devstack.kafka import render_properties
from devstack.postgres_tls import debian_bin_dir, hba_lines, server_options
from devstack.procs import StackError
from devstack.settings import StackSettings

from pipeline.settings import KafkaSettings


def _props(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        assert key not in out, f"{key} set twice"
        out[key] = value
    return out


def _cfg(tmp_path: Path, **kw: object) -> StackSettings:
    return StackSettings(dir=tmp_path / "stack", **kw)  # type: ignore[arg-type]


def test_plain_broker_has_no_secure_listener(tmp_path: Path) -> None:
    props = _props(render_properties(_cfg(tmp_path), tmp_path / "data"))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert not [k for k in props if k.startswith(("ssl.", "listener.name."))]
    assert not (tmp_path / "stack" / "pki").exists()  # no CA made for a plain stack


def test_secure_broker_adds_three_tls_listeners_and_keeps_plaintext(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, secure=True)
    props = _props(render_properties(cfg, tmp_path / "data"))
    want = (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
        "SCRAM://127.0.0.1:9192,MTLS://127.0.0.1:9193,OAUTH://127.0.0.1:9194"
    )
    assert props["listeners"] == props["advertised.listeners"] == want
    assert props["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SCRAM:SASL_SSL,MTLS:SSL,OAUTH:SASL_SSL"
    )
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["controller.listener.names"] == "CONTROLLER"
    # One mechanism per SASL listener, each with its login module.
    assert props["listener.name.scram.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert (
        "ScramLoginModule required" in props["listener.name.scram.scram-sha-512.sasl.jaas.config"]
    )
    assert props["listener.name.oauth.sasl.enabled.mechanisms"] == "OAUTHBEARER"
    assert "OAuthBearerLoginModule" in props["listener.name.oauth.oauthbearer.sasl.jaas.config"]
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    # No global sasl.enabled.mechanisms or client auth: PLAINTEXT is untouched.
    assert "sasl.enabled.mechanisms" not in props and "ssl.client.auth" not in props
    # PEM key store: the key, the broker's certificate and the CA, in one file.
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    keystore = Path(props["ssl.keystore.location"]).read_text()
    assert keystore.count("BEGIN PRIVATE KEY") == 1
    assert keystore.count("BEGIN CERTIFICATE") == 2
    assert Path(props["ssl.truststore.location"]) == secure.pki(cfg).ca_cert
    assert stat.S_IMODE(Path(props["ssl.keystore.location"]).stat().st_mode) == 0o600


def test_ports_are_settings(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, secure=True, kafka_scram_port=1111, kafka_mtls_port=2222)
    props = _props(render_properties(cfg, tmp_path / "data"))
    assert ",SCRAM://127.0.0.1:1111,MTLS://127.0.0.1:2222," in props["listeners"]


def test_client_env_builds_the_pipelines_kafka_clients(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, secure=True)
    for name in ("SCRAM", "MTLS", "OAUTH"):
        env = secure.kafka_env(cfg, name)
        fields = {k.removeprefix("KAFKA_").lower(): v for k, v in env.items()}
        kw = KafkaSettings.model_validate(fields).client_kwargs()
        assert kw["ssl_context"] is not None  # the CA (and client pair) load
        assert kw["bootstrap_servers"] == secure.listener(cfg, name).address
    scram = secure.kafka_env(cfg, "SCRAM")
    assert scram["KAFKA_SASL_PASSWORD"] == secure.scram_password(cfg)
    assert "KAFKA_SASL_PASSWORD" not in secure.kafka_env(cfg, "MTLS")


def test_generated_passwords_are_kept_and_private(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, secure=True)
    first = secure.scram_password(cfg)
    assert first == secure.scram_password(cfg) and len(first) >= 32
    assert first != secure.pg_password(cfg)
    path = tmp_path / "stack" / "secure" / "kafka-scram-ingest.password"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secure.scram_credential(cfg) == f"SCRAM-SHA-512=[name=ingest,password={first}]"


def test_database_url_verifies_the_server(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, secure=True)
    url = secure.database_url(cfg)
    assert url.startswith(f"postgresql://ingest:{secure.pg_password(cfg)}@127.0.0.1:55433/ingest?")
    assert url.endswith(f"?sslmode=verify-full&sslrootcert={secure.pki(cfg).ca_cert}")
    lines = "\n".join(secure.client_lines(cfg))
    assert f"export DATABASE_URL='{url}'" in lines
    assert "KAFKA_SECURITY_PROTOCOL=SSL" in lines


def test_pg_hba_lets_in_tls_with_a_password_only() -> None:
    rules = [ln.split() for ln in hba_lines() if ln and not ln.startswith("#")]
    assert rules, hba_lines()
    for rule in rules:
        assert rule[0] == "hostssl", rule
        assert rule[-1] == "scram-sha-256", rule
        assert rule[3].split("/")[0] in ("127.0.0.1", "::1"), rule


def test_server_options_turn_tls_on(tmp_path: Path) -> None:
    opts = " ".join(server_options(55433, tmp_path / "sock", tmp_path / "tls", tmp_path / "hba"))
    assert "-c ssl=on" in opts and "-p 55433" in opts
    assert f"-c hba_file={tmp_path / 'hba'}" in opts
    assert f"-c ssl_key_file={tmp_path / 'tls' / 'server.key'}" in opts


def test_debian_binaries_newest_major(tmp_path: Path) -> None:
    for major in ("9", "15", "16"):
        (tmp_path / major / "bin").mkdir(parents=True)
        (tmp_path / major / "bin" / "postgres").touch()
    (tmp_path / "17" / "bin").mkdir(parents=True)  # no server binary: not a candidate
    assert debian_bin_dir(tmp_path) == tmp_path / "16" / "bin"
    with pytest.raises(StackError, match="make system-deps"):
        debian_bin_dir(tmp_path / "none")


def test_secure_refuses_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert manager.up(_cfg(tmp_path, secure=True), kafka_nodes=3) == 1
    assert "--kafka-nodes" in capsys.readouterr().err


def test_a_foreign_broker_without_secure_listeners_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker answers on PLAINTEXT without the secure listeners, and this stack has no
    pid file for it: ``up --secure`` must not restart what it did not start."""
    from devstack.kafka import Kafka

    kafka = Kafka(_cfg(tmp_path, secure=True))
    monkeypatch.setattr(Kafka, "already_running", lambda self, what: True)
    monkeypatch.setattr(Kafka, "secure_answering", lambda self: False)
    with pytest.raises(StackError, match=r"not started by this stack.*up --secure"):
        kafka.ensure()
    monkeypatch.setattr(Kafka, "secure_answering", lambda self: True)
    assert kafka.ensure() == "already running"
