"""Development sessions for crashpoint. `nox` alone runs the tests."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "none"  # use the interpreter crashpoint is installed in
nox.options.sessions = ["tests"]

SOURCES = [
    "harness",
    "scenarios",
    "fake_providers",
    "reports",
    "tests",
    "benchmarks",
    "examples",
    "noxfile.py",
]


@nox.session
def tests(session: nox.Session) -> None:
    """Run the unit and process tiers."""
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(default=False)
def unit(session: nox.Session) -> None:
    """Run only the fast unit tier (no sockets, no sleeps)."""
    session.run("python", "-m", "pytest", "tests/unit", "-m", "not process", *session.posargs)


@nox.session(default=False)
def e2e(session: nox.Session) -> None:
    """Run only the process tier (real processes, signals and servers)."""
    session.run("python", "-m", "pytest", "-m", "process", *session.posargs)


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """Check style with ruff and the package layers with import-linter."""
    session.run("python", "-m", "ruff", "check", *SOURCES, *session.posargs)
    session.run("python", "-m", "ruff", "format", "--check", *SOURCES)
    session.run("lint-imports")


@nox.session(default=False)
def typecheck(session: nox.Session) -> None:
    """Check types with mypy in strict mode."""
    session.run("python", "-m", "mypy", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Measure speed and memory targets; prints medians and ratios."""
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """Run `crashpoint demo` on the embedded default."""
    session.run("python", "-m", "harness", "demo", *session.posargs)
