"""What a pytest session asks of crashpoint: its options, read once and checked.

Every option of ``harness.pytest_plugin`` can also be set in ``[tool.pytest.ini_options]``
(the command line wins). Values are checked here, when the feature is on, so a typo is a
pytest usage error naming the option, not a matrix that quietly tests something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

#: ``--crashpoint`` given without a value: the configured target, else one found.
AUTO = "auto"
REFERENCE = "reference"
LEDGERS = ("sqlite", "postgres")
BACKENDS = ("process", "docker")
SIGNALS = ("SIGKILL", "SIGTERM", "SIGSTOP")
INCONCLUSIVE_MODES = ("fail", "skip")
LEASE_RANGE_S = (0.1, 60.0)
DEFAULT_OUT = "crashpoint-out"


@dataclass(frozen=True)
class Settings:
    """One session's crashpoint options, from the command line, else the ini file."""

    #: ``--crashpoint`` was given: the matrix is collected as items.
    items: bool
    #: ``reference``, a path (a crashpoint.toml, a pyproject.toml or a directory holding
    #: one), or None: find one in the rootdir.
    target: str | None
    #: Where relative target and output paths are taken from.
    base: Path
    scenarios: tuple[str, ...] = ()
    points: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()
    ledger: str = "sqlite"
    backend: str = "process"
    seed: int | None = None
    lease_ttl_s: float | None = None
    out: Path = Path(DEFAULT_OUT)
    inconclusive: str = "fail"
    pg_dsn: str | None = None

    def target_path(self, rootdir: Path) -> Path | None:
        """The target's configuration file, or None for the reference worker.

        Raises ``ConfigError`` when none is named and the rootdir has none.
        """
        if self.target == REFERENCE:
            return None
        if self.target is not None:
            path = Path(self.target)
            return path if path.is_absolute() else self.base / path
        from harness.targets.config import find_config

        return find_config(rootdir)


def read_settings(config: pytest.Config) -> Settings:
    """The session's settings; ``pytest.UsageError`` naming the option on a bad value."""
    cli_dir = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    flag = config.getoption("crashpoint")
    target, base = _target(config, flag, cli_dir, ini_dir)
    out_cli = config.getoption("crashpoint_out")
    out_ini = config.getini("crashpoint_out")
    out = cli_dir / out_cli if out_cli else ini_dir / (out_ini or DEFAULT_OUT)
    return Settings(
        items=flag is not None,
        target=target,
        base=base,
        scenarios=_names(config, "scenario"),
        points=_names(config, "point"),
        # A kind, or a declared provider's name: the selection checks names against the
        # target's configuration.
        providers=_names(config, "provider"),
        signals=_choices(config, "signal", _names(config, "signal"), SIGNALS),
        ledger=_choice(config, "ledger", LEDGERS),
        backend=_choice(config, "backend", BACKENDS),
        seed=_integer(config, "seed"),
        lease_ttl_s=_lease(config),
        out=out,
        inconclusive=_choice(config, "inconclusive", INCONCLUSIVE_MODES),
        pg_dsn=config.getoption("crashpoint_pg_dsn") or None,
    )


def _target(
    config: pytest.Config, flag: str | None, cli_dir: Path, ini_dir: Path
) -> tuple[str | None, Path]:
    if flag not in (None, AUTO):
        return flag, cli_dir
    named = config.getoption("crashpoint_config")
    if named:
        return named, cli_dir
    from_ini = str(config.getini("crashpoint_config") or "").strip()
    return (from_ini or None), ini_dir


def _value(config: pytest.Config, name: str) -> str | None:
    """The option ``--crashpoint-NAME``, else the ini key ``crashpoint_NAME``."""
    given = config.getoption(f"crashpoint_{name}")
    if given is not None:
        return str(given)
    from_ini = str(config.getini(f"crashpoint_{name}") or "").strip()
    return from_ini or None


def _names(config: pytest.Config, name: str) -> tuple[str, ...]:
    given = config.getoption(f"crashpoint_{name}") or []
    if given:
        return tuple(given)
    return tuple(str(v) for v in config.getini(f"crashpoint_{name}s"))


def _choices(
    config: pytest.Config, name: str, values: Sequence[str], allowed: Sequence[str]
) -> tuple[str, ...]:
    for value in values:
        if value not in allowed:
            raise pytest.UsageError(
                f"crashpoint: --crashpoint-{name} {value!r} is unknown; "
                f"choose from {', '.join(allowed)}"
            )
    return tuple(values)


def _choice(config: pytest.Config, name: str, allowed: Sequence[str]) -> str:
    value = _value(config, name) or allowed[0]
    return _choices(config, name, [value], allowed)[0]


def _integer(config: pytest.Config, name: str) -> int | None:
    value = _value(config, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(
            f"crashpoint: --crashpoint-{name} {value!r} must be a whole number, for example 7"
        ) from None


def _lease(config: pytest.Config) -> float | None:
    value = _value(config, "lease_ttl_s")
    if value is None:
        return None
    low, high = LEASE_RANGE_S
    try:
        lease = float(value)
    except ValueError:
        lease = -1.0
    if not low <= lease <= high:
        raise pytest.UsageError(
            f"crashpoint: --crashpoint-lease-ttl-s {value!r} must be seconds from {low} to "
            f"{high:.0f}, for example 0.6"
        )
    return lease
