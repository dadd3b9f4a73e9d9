"""bench.e2e: bare Temporal vs RunActivityWorkflow vs the whole pipeline (``bench.e2e.run``).

Kept empty: the workflow sandbox imports ``bench.e2e.bare`` through this package.
"""
