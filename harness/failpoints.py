"""The Python failpoint client under its public name (see :mod:`harness.contract.failpoint`).

A Python worker writes ``from harness.contract.failpoint import failpoint``; importing it loads
the contract package only, never the engine.
"""

from __future__ import annotations

from harness.contract.failpoint import enabled, failpoint, job_end

__all__ = ["enabled", "failpoint", "job_end"]
