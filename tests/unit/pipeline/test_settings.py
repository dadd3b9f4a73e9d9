import pytest

from pipeline import settings


def test_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("KAFKA_PARTITIONS", "many")
    with pytest.raises(settings.ConfigError, match="KAFKA_PARTITIONS"):
        settings.load()


def test_bad_database_url_names_the_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://x")
    with pytest.raises(settings.ConfigError, match="DATABASE_URL"):
        settings.load()


def test_secrets_never_printed(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:db-s3cret@h/db")
    monkeypatch.setenv("TEMPORAL_API_KEY", "tmprl-s3cret")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "kafka-s3cret")
    cfg = settings.load()
    text = repr(cfg) + str(cfg) + cfg.model_dump_json()
    for secret in ("db-s3cret", "tmprl-s3cret", "kafka-s3cret"):
        assert secret not in text
    assert cfg.temporal.api_key.get_secret_value() == "tmprl-s3cret"


def test_empty_secrets_mean_unset(monkeypatch):
    monkeypatch.setenv("TEMPORAL_API_KEY", "")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "")
    cfg = settings.load()
    assert cfg.temporal.api_key is None and cfg.kafka.sasl_password is None


def test_cli_overrides_win(monkeypatch):
    monkeypatch.setenv("KAFKA_RAW_TOPIC", "from-env")
    assert settings.load(kafka__raw_topic="from-flag").kafka.raw_topic == "from-flag"
    assert settings.load().kafka.raw_topic == "from-env"


def test_router_settings_error_names_the_variable(monkeypatch):
    from router.config import load_router_settings

    monkeypatch.setenv("INGEST_ROUTER_CONCURRENCY", "0")
    with pytest.raises(settings.ConfigError, match="INGEST_ROUTER_CONCURRENCY"):
        load_router_settings()
    monkeypatch.delenv("INGEST_ROUTER_CONCURRENCY")
    assert load_router_settings(concurrency=None, group="g").group == "g"
