"""Config files the local stack writes (package data), filled in with ``str.format``."""

from __future__ import annotations

from importlib.resources import files


def template(name: str) -> str:
    """The text of template ``name`` (e.g. ``server.properties``)."""
    return files(__name__).joinpath(name).read_text()
