"""A reference worker starts on what it needs: no adapter, no engine, no HTTP stack yet.

Every trial starts one to three workers, so what ``python -m scenarios.worker`` imports
before its first claim is paid many times over a run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

#: Not loaded at a worker's start: sqlite3 only once it opens its ledger; http.client
#: (with ssl and the email parser) never, since the worker speaks HTTP itself; and
#: dataclasses with the inspect module it loads, a third of its own imports, never.
NOT_AT_START = (
    "scenarios.reference",
    "http.client",
    "ssl",
    "email.parser",
    "sqlite3",
    "dataclasses",
    "inspect",
)


def test_a_worker_starts_without_the_adapter_the_engine_or_http() -> None:
    probe = "import json, sys, scenarios.worker.loop; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(json.loads(out))
    assert "scenarios.worker.attempt" in loaded, "the probe imported the worker"
    assert loaded.isdisjoint(NOT_AT_START), sorted(loaded & set(NOT_AT_START))
    engine = {m for m in loaded if m.startswith("harness.")} - contract(loaded)
    assert engine == set()


def contract(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "harness.contract" or m.startswith("harness.contract.")}
