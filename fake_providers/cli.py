"""``crashpoint provider serve``: run one fake provider in the foreground."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from fake_providers.models import KINDS
from fake_providers.tools import TRANSPORTS
from harness.contract.vocabulary import PERSONA_KINDS


@click.command("serve")
@click.option(
    "--kind",
    type=click.Choice((*KINDS, *PERSONA_KINDS)),
    metavar="KIND",
    required=True,
    help=f"{'|'.join(KINDS)}, or a persona: {'|'.join(PERSONA_KINDS)}.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="TCP port; 0 picks a free one (read it from the ready line).",
)
@click.option(
    "--state",
    "state",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="SQLite file holding the effect log; reused on restart.",
)
@click.option("--name", default=None, help="Its name in arrivals and effects [default: kind].")
@click.option(
    "--key-ttl-s",
    type=click.FloatRange(min=0, min_open=True),
    default=86400.0,
    show_default=True,
    help="Seconds an idempotency key is remembered.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Loopback address to bind; anything else is refused.",
)
@click.option(
    "--hold-max-s",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="A hold nobody releases ends as a drop after this many seconds.",
)
@click.option(
    "--transport",
    type=click.Choice(TRANSPORTS),
    default="http",
    show_default=True,
    help="mcp also serves the kind's tools at /mcp (Model Context Protocol, streamable HTTP).",
)
@click.option(
    "--tool-hints",
    default=None,
    help="Override the write tool's MCP annotations, as JSON: '{\"idempotentHint\": true}'.",
)
@click.option(
    "--routes",
    default=None,
    metavar="JSON",
    help="Kind http: its route table, as read from crashpoint.toml.",
)
@click.option(
    "--exit-on-stdin-eof",
    is_flag=True,
    help="Stop when stdin closes (a launcher's pipe: stop when the launcher dies).",
)
@click.option(
    "--new-port-on-wipe",
    is_flag=True,
    help="Listen on a new port after each POST /_control/wipe (a pool's providers do).",
)
@click.option(
    "--no-peer-pid",
    is_flag=True,
    help="Do not resolve the client's pid for arrivals (saves a /proc scan).",
)
@click.option(
    "--secret-stdin",
    is_flag=True,
    help="Read the control/oracle secret from the first line of stdin (how the launcher "
    "hands it over) instead of making one.",
)
@click.option(
    "--no-secret",
    is_flag=True,
    help="Leave /_control and /_oracle open to anyone (local poking only).",
)
def serve(
    kind: str,
    port: int,
    state: Path,
    name: str | None,
    key_ttl_s: float,
    host: str,
    hold_max_s: float,
    transport: str,
    tool_hints: str | None,
    routes: str | None,
    exit_on_stdin_eof: bool,
    new_port_on_wipe: bool,
    no_peer_pid: bool,
    secret_stdin: bool,
    no_secret: bool,
) -> None:
    """Serve one provider until SIGTERM; prints one JSON ready line with its URL.

    The control and oracle APIs need its secret (X-Crashpoint-Secret), printed in
    the ready line unless given by --secret-stdin (or dropped: --no-secret).
    """
    from fake_providers.seal import make_secret, read_secret
    from fake_providers.server import build, is_loopback, serve_forever

    if not is_loopback(host):
        raise click.BadParameter(
            f"{host!r} is not a loopback address; use 127.0.0.1", param_hint="--host"
        )
    hints = None
    if tool_hints is not None:
        from fake_providers.tools import parse_hints

        if transport != "mcp":
            raise click.UsageError("--tool-hints needs --transport mcp (only tools have hints)")
        try:
            hints = parse_hints(tool_hints)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--tool-hints") from None
    if (kind == "http") != (routes is not None):
        raise click.UsageError("--routes goes with --kind http, and --kind http needs --routes")
    if secret_stdin and no_secret:
        raise click.UsageError("--secret-stdin and --no-secret contradict each other; pick one")
    announce: dict[str, str] = {}
    secret: str | None = None
    if secret_stdin:
        try:
            secret = read_secret(0)
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"--secret-stdin: {exc}") from exc
    elif not no_secret:
        # Printed, not passed anywhere else: whoever started this reads it off stdout.
        secret = make_secret()
        announce["secret"] = secret
    try:
        server = build(
            kind=kind,
            name=name or kind,
            state_path=state,
            key_ttl_s=key_ttl_s,
            host=host,
            port=port,
            peer_pids=not no_peer_pid,
            hold_max_s=hold_max_s,
            secret=secret,
            transport=transport,
            tool_hints=hints,
            new_port_on_wipe=new_port_on_wipe,
            routes=_routes(routes),
        )
    except (OSError, sqlite3.Error) as exc:
        raise click.ClickException(
            f"cannot serve on {host}:{port} with state {state}: {exc}"
        ) from exc
    serve_forever(server, exit_on_stdin_eof=exit_on_stdin_eof, announce=announce)
    # Stopped: holds dropped, the store closed, the log flushed below. What is left is the
    # interpreter's teardown of its modules, which frees nothing the kernel does not and
    # was most of each stop (a run stops every provider of its pool at its end).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _routes(raw: str | None) -> dict[str, Any] | None:
    """``--routes`` as a JSON object (checked when crashpoint.toml was read)."""
    if raw is None:
        return None
    try:
        table = json.loads(raw)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--routes") from None
    from fake_providers.personas.declared import Declared

    try:
        Declared(table)
    except (AttributeError, KeyError, TypeError) as exc:
        raise click.BadParameter(
            f"not a route table (missing or wrong: {exc}); write it in crashpoint.toml and "
            "let crashpoint start the provider",
            param_hint="--routes",
        ) from None
    return dict(table)
