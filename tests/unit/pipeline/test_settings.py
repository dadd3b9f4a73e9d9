import pytest

from pipeline import settings


def test_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("KAFKA_PARTITIONS", "many")
    with pytest.raises(settings.ConfigError, match="KAFKA_PARTITIONS"):
        settings.load_settings()


def test_bad_database_url_names_the_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://x")
    with pytest.raises(settings.ConfigError, match="DATABASE_URL"):
        settings.load_settings()


def test_secrets_never_printed(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:db-s3cret@h/db")
    monkeypatch.setenv("TEMPORAL_API_KEY", "tmprl-s3cret")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "ingest")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "kafka-s3cret")
    cfg = settings.load_settings()
    text = repr(cfg) + str(cfg) + cfg.model_dump_json()
    for secret in ("db-s3cret", "tmprl-s3cret", "kafka-s3cret"):
        assert secret not in text
    assert cfg.temporal.api_key is not None
    assert cfg.temporal.api_key.get_secret_value() == "tmprl-s3cret"


def test_empty_secrets_mean_unset(monkeypatch):
    monkeypatch.setenv("TEMPORAL_API_KEY", "")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "")
    cfg = settings.load_settings()
    assert cfg.temporal.api_key is None and cfg.kafka.sasl_password is None


def test_cli_overrides_win(monkeypatch):
    monkeypatch.setenv("KAFKA_RAW_TOPIC", "from-env")
    assert settings.load_settings(kafka__raw_topic="from-flag").kafka.raw_topic == "from-flag"
    assert settings.load_settings().kafka.raw_topic == "from-env"


def test_router_settings_error_names_the_variable(monkeypatch):
    from router.settings import load_router_settings

    monkeypatch.setenv("INGEST_ROUTER_CONCURRENCY", "0")
    with pytest.raises(settings.ConfigError, match="INGEST_ROUTER_CONCURRENCY"):
        load_router_settings()
    monkeypatch.delenv("INGEST_ROUTER_CONCURRENCY")
    assert load_router_settings(concurrency=None, group="g").group == "g"


def test_each_process_has_its_own_metrics_port(monkeypatch):
    monkeypatch.delenv("INGEST_METRICS_PORT", raising=False)
    ports = {c: settings.load_settings(c).process.metrics_port for c in settings.METRICS_PORTS}
    assert ports == {"ingress": 9400, "router": 9401, "worker": 9402, "ops": 9403, "relay": 9404}
    assert len(set(ports.values())) == len(ports), "two processes would collide on one host"


def test_metrics_port_env_and_flag_win_over_the_process_default(monkeypatch):
    monkeypatch.setenv("INGEST_METRICS_PORT", "9555")
    assert settings.load_settings("router").process.metrics_port == 9555
    assert settings.load_settings("router", process__metrics_port=0).process.metrics_port == 0


def test_every_loader_names_the_variable_the_same_way(monkeypatch):
    from ingress.settings import load_ingress_settings
    from router.settings import load_router_settings
    from workers.settings import load_worker_settings

    monkeypatch.setenv("INGEST_INGRESS_BATCH_SIZE", "0")
    monkeypatch.setenv("INGEST_ROUTER_CONCURRENCY", "0")
    monkeypatch.setenv("INGEST_MAX_CONCURRENT_ACTIVITIES", "0")
    monkeypatch.setenv("KAFKA_PARTITIONS", "0")
    for load, env in (
        (load_ingress_settings, "INGEST_INGRESS_BATCH_SIZE"),
        (load_router_settings, "INGEST_ROUTER_CONCURRENCY"),
        (load_worker_settings, "INGEST_MAX_CONCURRENT_ACTIVITIES"),
        (settings.load_settings, "KAFKA_PARTITIONS"),
    ):
        with pytest.raises(settings.ConfigError, match=rf"^invalid setting {env}: "):
            load()


def test_compression_type_defaults_to_none_and_takes_kafkas_spelling(monkeypatch):
    assert settings.load_settings().kafka.compression() is None
    monkeypatch.setenv("KAFKA_COMPRESSION_TYPE", " LZ4 ")
    assert settings.load_settings().kafka.compression() == "lz4"


def test_bad_compression_type_names_the_variable(monkeypatch):
    monkeypatch.setenv("KAFKA_COMPRESSION_TYPE", "brotli")
    with pytest.raises(settings.ConfigError, match=r"KAFKA_COMPRESSION_TYPE.*'lz4' or 'zstd'"):
        settings.load_settings()


def test_compression_without_its_codec_library_names_the_variable(monkeypatch):
    from aiokafka import codec

    monkeypatch.setattr(codec, "cramjam", None)  # as on an install without the extras
    monkeypatch.setenv("KAFKA_COMPRESSION_TYPE", "zstd")
    with pytest.raises(settings.ConfigError, match=r"KAFKA_COMPRESSION_TYPE.*aiokafka\[lz4"):
        settings.load_settings()


def test_a_workflow_cache_smaller_than_the_task_slots_names_the_variable(monkeypatch):
    from workers.settings import load_worker_settings

    monkeypatch.setenv("INGEST_MAX_CONCURRENT_WORKFLOW_TASKS", "100")
    monkeypatch.setenv("INGEST_MAX_CACHED_WORKFLOWS", "50")
    with pytest.raises(
        settings.ConfigError, match=r"^invalid setting INGEST_MAX_CACHED_WORKFLOWS: 50 is below"
    ):
        load_worker_settings()
    monkeypatch.setenv("INGEST_MAX_CACHED_WORKFLOWS", "0")  # no cache at all: allowed
    assert load_worker_settings().max_cached_workflows == 0
    monkeypatch.setenv("INGEST_MAX_CACHED_WORKFLOWS", "100")
    assert load_worker_settings().max_cached_workflows == 100
