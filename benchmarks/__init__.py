"""Benchmarks: speed and memory targets, reported as medians and ratios (``nox -s bench``)."""
