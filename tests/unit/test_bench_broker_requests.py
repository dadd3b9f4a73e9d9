"""bench.e2e.broker_requests: JmxTool's one-time CSV read per API (the sample is a real
answer of the stack's Kafka 4.1.1 broker), and the per-run figures of a phase."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.e2e.broker_requests import BrokerRequests, parse

OUTPUT = (
    "Trying to connect to JMX url: service:jmx:rmi:///jndi/rmi://127.0.0.1:19999/jmxrmi\n"
    '"time","kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Heartbeat,version=1'
    ':Count","kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Heartbeat,version=4'
    ':Count","kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=17'
    ':Count","kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer,'
    'version=17:Count"\n'
    "1796538882369,277,4,2346,2345\n"
)


def test_counts_are_summed_per_api_over_versions() -> None:
    assert parse(OUTPUT) == Counter({"Heartbeat": 281, "Fetch": 2346, "FetchConsumer": 2345})


def test_an_answer_without_a_header_is_an_error() -> None:
    with pytest.raises(ValueError, match="no JmxTool header"):
        parse("Trying to connect to JMX url: x\nException in thread main\n")


def test_per_run_figures_leave_the_kinds_of_fetch_out_of_the_total() -> None:
    reads = iter(
        [
            Counter({"Fetch": 100, "FetchConsumer": 100, "Produce": 50, "Metadata": 1}),
            Counter({"Fetch": 300, "FetchConsumer": 300, "Produce": 150, "Metadata": 2}),
        ]
    )
    meter = BrokerRequests("cp", "url")
    meter.read = lambda: next(reads)  # type: ignore[method-assign]
    meter.start()
    # 100 runs: 2 fetches and 1 produce each; one metadata request is under 0.05 per run
    assert meter.stop(100) == {"Fetch": 2.0, "FetchConsumer": 2.0, "Produce": 1.0, "total": 3.01}
