"""Targets: the reference worker and command-described workers."""
