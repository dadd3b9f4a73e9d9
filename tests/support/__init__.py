"""Test support: one home for the helpers every suite shares.

* :mod:`tests.support.kafka`: produce (aiokafka, librdkafka, Kafka's Java producer), read,
  committed and end offsets on the real broker;
* :mod:`tests.support.temporal`: does Temporal know a workflow id (only NOT_FOUND means no);
* :mod:`tests.support.db`: seed activity rows;
* :mod:`tests.support.metrics`: read counters in-process or scrape a process's /metrics,
  failing on a metric that does not exist;
* :mod:`tests.support.wait`: wait for a condition, or for a bounded quiet period;
* :mod:`tests.support.net`: free ports;
* :mod:`tests.support.routing`: run the live Router in-process until it has committed;
* :mod:`tests.support.inprocess`: ingress, router and worker in-process, for end-to-end tests;
* :mod:`tests.support.prometheus`: a private Prometheus server scraping the processes a
  test started, with the project's alert rules;
* :mod:`tests.support.process`: environments for, and starters of, pipeline processes.

Fixtures stay in ``conftest.py`` files; helpers live here and nothing imports from a conftest.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
