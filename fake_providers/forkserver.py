"""``python -m fake_providers.forkserver FD``: forks warm providers for one pool.

A provider's start is a Python launch plus its imports (``http.server`` and the app):
about 100 ms of CPU each (an MCP provider's SDK most of a second more), and a wide run
starts dozens while every core is busy with its trials. This process pays that once: it
imports everything a provider needs (the MCP SDK before its first MCP provider), then
forks one child per request on the Unix socket ``FD`` (the pool's end is
:class:`fake_providers.forked.ForkServer`). A child is what ``python -m fake_providers
--secret-stdin --exit-on-stdin-eof`` would be: its own session, stdin and stdout on the
pipes the request passed, stderr appended to the request's log, the secret read from
stdin, one ready line on stdout, a stop at stdin's EOF.

Requests are one JSON object per message; replies too:

- ``{"op": "spawn", "settings": {...}, "log": PATH}`` with two descriptors (the child's
  stdin and stdout) answers ``{"pid": N}`` with the child's pidfd, so the pool can wait
  for an exit without being the parent;
- ``{"op": "status", "pid": N}`` answers ``{"code": C}``: the exit status as
  ``subprocess`` gives it (negative for a signal), or None while it runs.

The socket's EOF (the pool closed, or its process died) ends this process; its
children stop by themselves at their own stdin's EOF.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

#: Largest request: settings are a dozen short fields and a path.
MAX_MESSAGE = 64 * 1024


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    # Imported before the first fork, so no child pays for them.
    import fake_providers.seal
    import fake_providers.server  # noqa: F401

    # The imports' objects never die; frozen, the children's collections leave their
    # pages shared instead of touching every one.
    gc.freeze()
    exits: dict[int, int] = {}
    # Reaped as they exit, so no dead provider lingers as a zombie until the next
    # request; the blocked recv below resumes after the handler (PEP 475).
    signal.signal(signal.SIGCHLD, lambda signum, frame: _reap(exits))
    sock.sendall(b'{"ready": true}')
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        except OSError:
            return 0
        if not msg:
            return 0
        try:
            request = json.loads(msg)
            reply, pidfd = _answer(request, fds, sock, exits)
        except Exception as exc:  # a bad request is answered, never fatal
            reply, pidfd = {"error": f"{type(exc).__name__}: {exc}"}, None
        finally:
            for fd in fds:
                os.close(fd)
        try:
            if pidfd is None:
                sock.sendall(json.dumps(reply).encode())
            else:
                socket.send_fds(sock, [json.dumps(reply).encode()], [pidfd])
                os.close(pidfd)
        except OSError:
            return 0


def _answer(
    request: dict[str, Any], fds: list[int], sock: socket.socket, exits: dict[int, int]
) -> tuple[dict[str, Any], int | None]:
    op = request.get("op")
    if op == "status":
        pid = int(request["pid"])
        return {"code": _status(pid, exits)}, None
    if op != "spawn":
        raise ValueError(f"unknown op {op!r}; use spawn or status")
    if len(fds) != 2:
        raise ValueError(f"spawn needs two descriptors (stdin, stdout), got {len(fds)}")
    if request["settings"].get("transport") == "mcp":
        _load_mcp_sdk()
    # SIGCHLD waits until the pidfd is open: a child that dies at once is not reaped
    # before, so the pidfd names this child and no later process that reuses its number.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, request["settings"], str(request["log"]))
        return {"pid": pid}, os.pidfd_open(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


@functools.cache
def _load_mcp_sdk() -> None:
    """Import the MCP SDK here, once, before the first MCP provider is forked: each would
    otherwise import it after its fork (most of a second of CPU), and a wide run's first
    trials ask for a dozen at once. A failed import is left for the child, which says why
    on its first tool call."""
    from fake_providers.mcp_tools import load_sdk

    with contextlib.suppress(Exception):
        load_sdk()
    gc.freeze()


def _child(sock: socket.socket, fds: list[int], settings: dict[str, Any], log: str) -> None:
    code = 1
    try:
        sock.close()
        os.setsid()  # its own group: the pool's kill reaches it and nothing else
        # Its command line is the fork server's; its name in ps and top says what it is.
        with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
            comm.write(f"provider {settings.get('name', '')}"[:15])
        stdin, stdout = fds
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(err, 2)
        for fd in (stdin, stdout, err):
            if fd > 2:
                os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})  # blocked at the fork
        _serve(settings)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve(settings: dict[str, Any]) -> None:
    from fake_providers.seal import read_secret
    from fake_providers.server import build, serve_forever

    server = build(
        kind=settings["kind"],
        name=settings["name"],
        state_path=settings["state"],
        key_ttl_s=float(settings["key_ttl_s"]),
        host="127.0.0.1",
        port=int(settings["port"]),
        peer_pids=bool(settings["peer_pids"]),
        hold_max_s=float(settings["hold_max_s"]),
        secret=read_secret(0),
        transport=settings["transport"],
        tool_hints=settings.get("tool_hints"),
        new_port_on_wipe=bool(settings["new_port_on_wipe"]),
        routes=settings.get("routes"),
    )
    serve_forever(server, exit_on_stdin_eof=True)


def _reap(exits: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exits[pid] = os.waitstatus_to_exitcode(status)


def _status(pid: int, exits: dict[int, int]) -> int | None:
    _reap(exits)  # in case its SIGCHLD is still on its way
    return exits.get(pid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
