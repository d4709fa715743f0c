"""Every module of the harness sits in a layer that import-linter checks.

A module missing from the layers contract in pyproject.toml would be checked by nothing:
this test makes adding one without placing it a failure.
"""

from __future__ import annotations

import pkgutil
import re
import tomllib
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[2]


def _layered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return {m for line in layers["layers"] for m in re.split(r"[|:]", line.strip("()")) if m}


def test_every_harness_module_is_in_a_layer() -> None:
    layered = {m.strip().strip("()") for m in _layered()}
    children = {f"harness.{m.name}" for m in pkgutil.iter_modules(harness.__path__)}
    assert children - layered == set(), "place these in the layers contract of pyproject.toml"


def test_the_parts_import_only_the_contract_of_the_harness() -> None:
    upward = re.compile(r"^\s*(from|import) harness(?!\.contract\b)[.\w]*", re.M)
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0).strip()}"
        for package in ("scenarios", "fake_providers", "reports")
        for path in (ROOT / package).rglob("*.py")
        for m in upward.finditer(path.read_text())
    ]
    assert found == []
