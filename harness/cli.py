"""The ``crashpoint`` command line."""

from __future__ import annotations

import sys

import click

from harness import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crashpoint")
def main() -> None:
    """Prove that a job worker produces each side effect exactly once."""


@main.command()
def doctor() -> None:
    """Say what is available here and how to get what is missing."""
    from harness.doctor import run_doctor

    sys.exit(run_doctor())


@main.command()
def demo() -> None:
    """Run the full matrix on the embedded default and write the HTML report."""
    click.echo("crashpoint demo: not built yet (the harness core is in progress).", err=True)
    sys.exit(3)


@main.group()
def provider() -> None:
    """Fake providers: run one in the foreground."""


def _register_provider_serve() -> None:
    try:
        from fake_providers.cli import serve
    except ImportError:  # the providers package is still being built
        return
    provider.add_command(serve)


_register_provider_serve()
