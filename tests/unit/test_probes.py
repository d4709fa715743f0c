"""DSN redaction and the default PostgreSQL (no server contacted)."""

from __future__ import annotations

import pytest

from harness.contract.env import DEFAULT_PG_DSN, PG_DSN
from harness.probes import ProbeFailed, postgres_dsn, redact


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:secret@h:5432/d", "postgresql://u:***@h:5432/d"),
        # The password ends at the last @ and starts after the first : of the user part.
        ("postgresql://u:p@ss@h:5432/d", "postgresql://u:***@h:5432/d"),
        ("postgresql://u:pa:ss@h/d?sslmode=off", "postgresql://u:***@h/d?sslmode=off"),
        ("postgresql://u:a:b@c@[::1]:5432/d", "postgresql://u:***@[::1]:5432/d"),
        ("host=h user=u password=se:c@t dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='a b' user=u", "host=h password=*** user=u"),
    ],
)
def test_the_whole_password_is_hidden(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown


@pytest.mark.parametrize(
    "dsn", ["postgresql://h/d", "postgresql://u@h:5432/d", "host=h user=u dbname=d"]
)
def test_a_dsn_without_a_password_is_unchanged(dsn: str) -> None:
    assert redact(dsn) == dsn


def test_the_default_dsn_yields_to_the_environment_and_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PG_DSN, raising=False)
    assert postgres_dsn() == DEFAULT_PG_DSN
    monkeypatch.setenv(PG_DSN, "postgresql://env/d")
    assert postgres_dsn() == "postgresql://env/d"
    assert postgres_dsn("postgresql://flag/d") == "postgresql://flag/d"


def test_a_failed_probe_says_how_to_fix_it() -> None:
    exc = ProbeFailed("PostgreSQL at x is not reachable", "bash scripts/install-infra.sh postgres")
    assert str(exc) == (
        "PostgreSQL at x is not reachable; start it with `bash scripts/install-infra.sh postgres`"
    )
