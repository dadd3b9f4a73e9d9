"""The full-size suite is sized to finish within its budget on a 2-core machine.

Arithmetic on the sizing table, not a timing: each scenario's runs at the measured
end-to-end throughput plus its fixed costs. A scenario grown past the budget fails
here before anyone waits hours for ``make faults``.
"""

from __future__ import annotations

from tests.faults import harness as h


def test_full_size_suite_fits_the_budget() -> None:
    estimate = h.suite_estimate()
    assert estimate <= h.SUITE_BUDGET_SECONDS, (
        f"full-size suite needs ~{estimate / 60:.0f} min at {h.THROUGHPUT} runs/s, "
        f"over the {h.SUITE_BUDGET_SECONDS / 60:.0f} min budget"
    )


def test_every_scenario_is_sized() -> None:
    assert all(s.runs >= 0 and s.fixed_seconds > 0 for s in h.FULL_SIZES.values())
