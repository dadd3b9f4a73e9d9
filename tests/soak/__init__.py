"""The one-hour soak (issue 40, section 2; ``docs/soak.md``): ``make soak``.

* ``test_soak.py``: the soak itself (marker ``soak``): setup, the ceiling burst, the
  paced mix with a fault every ``SOAK_FAULT_EVERY`` s, the drain, the figures, the
  invariants;
* ``knobs.py``: ``SOAK_MINUTES``, ``SOAK_FAULT_EVERY``, ``SOAK_WINDOW``, ``SOAK_RATE``,
  ``SOAK_FAULTS``, ``SOAK_MEMPROBE``;
* ``rig.py``: the private servers, the proxies, the pipeline's processes and the fault
  kinds with their rotation;
* ``workload.py``: the mix of activities, the paced producer, the approver, what the raw
  topic holds;
* ``sampler.py``: RSS and fds per process, PostgreSQL connections, Kafka lag, every 5 s;
* ``analysis.py``: the figures per window, RSS growth, p99 recovery after each fault
  (pure functions);
* ``report.py``: ``soak.json``, ``windows.csv``, ``timeline.png`` and the printed table;
* ``memprobe/sitecustomize.py`` and ``memreport.py``: with ``SOAK_MEMPROBE``, where a
  process's memory is (pymalloc, glibc's heap, live objects by type), and its table;
* ``conftest.py``: the cluster fixtures and the fault suite's ``fault`` (a
  ``tests.faults.harness.Scenario``);
* ``test_analysis.py``, ``test_workload.py``: unit tests of the figures, the knobs, the mix
  and the rotation (no server; they run in every ``make test``).
"""
