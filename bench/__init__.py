"""Benchmarks against the running local stack; each prints its target ratio as its last line.

Every figure goes to ``bench/results/<name>.json`` (git-ignored). Baselines are
measured in the same run against the same servers, so a ratio compares like
with like on whatever machine runs it. ``make bench`` runs them all.
"""
