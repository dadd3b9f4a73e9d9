"""Temporal's time-skipping test server, offline: the Java test server from Maven.

``WorkflowEnvironment.start_time_skipping()`` downloads a test-server binary from
the internet by default. This runs the same server (the Java SDK's
``io.temporal:temporal-test-server``) with the machine's Java 17 instead, from
jars Maven fetches once into ``.cache/`` (git-ignored), as the local Kafka's
broker jars are fetched (``devstack.maven``). A small wrapper script is the
executable the SDK starts with the port as its argument
(``test_server_existing_path``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from devstack.maven import copy_jars
from devstack.procs import StackError
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from schemas.search_attributes import KEYWORDS
from tests.support import ROOT

# The test server of this Java SDK release (resolves from Maven Central with its
# dependencies; runs on Java 17). INGEST_TEST_SERVER_VERSION picks another.
VERSION = os.environ.get("INGEST_TEST_SERVER_VERSION", "1.35.0")
MAIN = "io.temporal.testserver.TestServer"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tests</groupId><artifactId>temporal-test-server</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>io.temporal</groupId><artifactId>temporal-test-server</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def test_server(cache: Path = ROOT / ".cache") -> Path:
    """The wrapper script that runs the test server on the port it is given."""
    java = shutil.which("java")
    if java is None:
        raise StackError("Java (17 or later) is needed to run Temporal's time-skipping test server")
    home = cache / f"temporal-test-server-{VERSION}"
    libs = copy_jars(
        home / "pom.xml",
        _POM.format(version=VERSION),
        home / "libs",
        f"the Temporal test server {VERSION} jars",
        "check network access to Maven Central or set INGEST_TEST_SERVER_VERSION",
    )
    script = home / "test-server"
    script.write_text(f"#!/bin/sh\nexec '{java}' -cp '{libs}/*' {MAIN} \"$@\"\n")
    script.chmod(0o755)
    return script


@asynccontextmanager
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping WorkflowEnvironment on the Java test server (stopped on exit)."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(test_server())
    )
    try:
        # The project's search attributes (a fresh server has none; this server cannot
        # list them, so pipeline.temporal_setup's add-what-is-missing does not apply).
        keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace, search_attributes=dict.fromkeys(KEYWORDS, keyword)
            )
        )
        yield env
    finally:
        await env.shutdown()
