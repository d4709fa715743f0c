"""The doctor's verdict and table, with fake probes (no servers contacted)."""

from __future__ import annotations

import io

from rich.console import Console

from harness.commands.doctor import run_doctor
from harness.doctor import Check, check_python


def _run(*checks: Check) -> tuple[int, str]:
    out = io.StringIO()
    probes = [lambda c=c: c for c in checks]
    code = run_doctor(probes, console=Console(file=out, width=200, color_system=None))
    return code, out.getvalue()


PY = Check("Python + SQLite", True, "here", required=True, version="3.11.7")


def test_all_present_exits_0() -> None:
    code, text = _run(PY, Check("Docker engine", True, "ok", version="20.10"))
    assert code == 0
    assert "Everything is available" in text


def test_optional_missing_still_exits_0_and_says_how_to_get_it() -> None:
    fix = "bash scripts/install-infra.sh postgres"
    code, text = _run(PY, Check("PostgreSQL", False, "refused", fix))
    assert code == 0
    assert fix in text
    assert "missing (optional)" in text
    assert "skipped" in text


def test_required_missing_exits_3() -> None:
    code, text = _run(Check("Python + SQLite", False, "3.9", "use Python 3.11", required=True))
    assert code == 3
    assert "MISSING (required)" in text


def test_a_broken_probe_is_reported_not_raised() -> None:
    def check_broken() -> Check:
        raise RuntimeError("probe exploded")

    out = io.StringIO()
    code = run_doctor([lambda: PY, check_broken], console=Console(file=out, width=200))
    assert code == 0
    assert "probe exploded" in out.getvalue()


def test_this_python_is_enough() -> None:
    check = check_python()
    assert check.ok
    assert check.required
