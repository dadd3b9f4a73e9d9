"""The environment variables the settings classes read."""

from __future__ import annotations

from tests.unit.deploy.assets import (
    known_env_vars,
)


def test_env_var_derivation() -> None:
    known = known_env_vars()
    for name in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "TEMPORAL_ADDRESS",
        "DATABASE_URL",
        "INGEST_METRICS_PORT",
    ):
        assert name in known
    assert "KAFKA_BOOTSTRAP_SERVER" not in known


def test_settings_modules_follow_one_naming_convention() -> None:
    """A package's settings: ``<package>/settings.py``, ``XxxSettings``, ``load_xxx_settings``."""
    import importlib
    import re

    from pydantic_settings import BaseSettings

    from tests.unit.deploy.assets import settings_modules

    modules = settings_modules()
    expected = {"pipeline.settings", "ingress.settings", "router.settings", "workers.settings"}
    assert expected | {"ops.settings"} <= set(modules), modules
    for name in modules:
        if name.startswith("pipeline."):
            continue  # pipeline.settings: the shared groups and load_settings; the local stack
        assert name.endswith(".settings"), f"{name}: settings belong in <package>/settings.py"
        module = importlib.import_module(name)
        classes = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, BaseSettings) and obj.__module__ == name
        ]
        assert classes, name
        for cls in classes:
            assert cls.__name__.endswith("Settings"), f"{name}.{cls.__name__}"
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__.removesuffix("Settings")).lower()
            assert callable(getattr(module, f"load_{snake}_settings", None)), (
                f"{name}: no load_{snake}_settings for {cls.__name__}"
            )
