"""The zygote: ``python zygote_server.py MODULE...``, run by its path with the worker's
own interpreter, which may not have the harness installed: the standard library only.

It imports the modules once, refuses to serve if that left a second thread alive (a
fork copies only the forking thread, so a child could inherit a lock held by a thread
that no longer exists), then answers one JSON line per request on the pipe the harness
gave it as stdin and stdout (:mod:`harness.backends.zygote` is the other end):

- first, unasked: ``{"ready": true, "pid": N}``, or ``{"error": "why"}`` and exit 1;
- ``{"op": "start", "id": I, "form": "script"|"module", "target": ..., "args": [...],
  "env": {...}, "cwd": ..., "stdout": PATH, "stderr": PATH, "procs": PATH|null}`` is
  answered ``{"id": I, "pid": N}`` once the child is forked (or ``{"id": I, "error"}``);
- each child's exit, when it happens, unasked: ``{"exit": N, "code": C, "t": T}``
  (``C`` as :mod:`subprocess` counts it, ``T`` this machine's monotonic clock). The
  zombie is kept, so neither its pid nor its process group id can be reused while the
  harness may still signal them, until ``{"op": "reap", "pid": N}``.

At EOF on its stdin (the harness closed it, or died) it SIGKILLs the process group of
every child it has not reaped, reaps them and exits: nothing it forked outlives it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import signal
import sys
import threading
import time
from typing import Any

#: A fallback poll, should a SIGCHLD wakeup ever be missed.
_POLL_S = 0.5
#: What the cgroup shim exits with when the worker cannot join its cgroup.
_JOIN_FAILED = 125


def main(modules: list[str]) -> dict[str, Any] | None:
    """Serve until EOF (None), or return the request a just-forked child is to run."""
    # The dispositions this interpreter started with: every child gets them back, as a
    # fresh interpreter started by the harness would have them.
    startup = {s: signal.getsignal(s) for s in signal.valid_signals()}
    rx, tx = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a module that prints as it is imported writes to the log, not the pipe
    # sys.path[0] is this file's directory (the harness's): no module may come from there.
    sys.path.pop(0)
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # a module may raise anything
            _send(tx, {"error": f"import {name} failed: {type(exc).__name__}: {exc}"})
            return None
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if threads:
        _send(
            tx,
            {
                "error": f"importing left threads running ({', '.join(threads)}), and a "
                "fork copies only one thread: preload modules that start none"
            },
        )
        return None
    _send(tx, {"ready": True, "pid": os.getpid()})
    request = _Loop(rx, tx).serve()
    if request is not None:
        request["startup"] = startup
    return request


class _Loop:
    """The zygote's one thread: requests on ``rx``, SIGCHLD through a wakeup pipe."""

    def __init__(self, rx: int, tx: int) -> None:
        self.rx, self.tx = rx, tx
        self.buf = b""
        #: Forked and not yet reaped, with whether its exit was reported.
        self.children: dict[int, bool] = {}
        #: Reap asked for before the exit was seen: reaped once it is.
        self.doomed: set[int] = set()

    def serve(self) -> dict[str, Any] | None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd fires
        signal.set_wakeup_fd(wake_w)
        sel = selectors.DefaultSelector()
        sel.register(self.rx, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select(_POLL_S):
                if key.fd == wake_r:
                    while _drain(wake_r):
                        pass
                    continue
                chunk = os.read(self.rx, 65536)
                if not chunk:
                    self.shutdown()
                    return None
                self.buf += chunk
                while b"\n" in self.buf:
                    line, _, self.buf = self.buf.partition(b"\n")
                    request: dict[str, Any] = json.loads(line)
                    if self.handle(request):
                        return request  # in the child: run it
            self.report_exits()

    def handle(self, request: dict[str, Any]) -> bool:
        """Act on one request; True in a child just forked."""
        if request.get("op") == "reap":
            pid = int(request["pid"])
            if self.children.get(pid):
                os.waitpid(pid, 0)
                del self.children[pid]
            elif pid in self.children:
                self.doomed.add(pid)
            return False
        if not os.path.isdir(request["cwd"]):
            reply = {"id": request["id"], "error": f"no such directory: {request['cwd']!r}"}
            _send(self.tx, reply)
            return False
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child writes the zygote's buffered text again
        pid = os.fork()
        if pid == 0:
            return True
        self.children[pid] = False
        _send(self.tx, {"id": request["id"], "pid": pid})
        return False

    def report_exits(self) -> None:
        for pid, reported in list(self.children.items()):
            if reported:
                continue
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is None or info.si_pid == 0:
                continue
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            self.children[pid] = True
            _send(self.tx, {"exit": pid, "code": code, "t": time.monotonic()})
            if pid in self.doomed:
                self.doomed.discard(pid)
                os.waitpid(pid, 0)
                del self.children[pid]

    def shutdown(self) -> None:
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # its zombie or itself pins the group's id
        for pid in self.children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def become(request: dict[str, Any]) -> None:
    """In the forked child: turn into the worker ``python SCRIPT`` or ``python -m
    MODULE`` would have started, then run it as ``__main__``."""
    signal.set_wakeup_fd(-1)
    os.setsid()
    procs = request.get("procs")
    if procs:
        # Into its cgroup before any code of the worker's runs: nothing escapes it.
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            _fail(request["stderr"], f"crashpoint: could not join cgroup {procs}: {exc}")
    for sig, handler in request["startup"].items():
        if handler is not None and sig not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError):  # one the C library reserves
                signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.chdir(request["cwd"])
    _redirect(request["stdout"], request["stderr"])
    os.environ.clear()
    os.environ.update(request["env"])
    target, args = request["target"], request["args"]
    if request["form"] == "module":
        sys.argv = ["-m", *args]  # runpy puts the module's file first, as -m does
        sys.path.insert(0, os.getcwd())
        run_as_main = runpy._run_module_as_main  # type: ignore[attr-defined]  # what -m runs
        run_as_main(target, alter_argv=True)
        return
    path = os.path.abspath(target)
    if not os.path.exists(path):
        sys.stderr.write(
            f"{sys.executable}: can't open file {path!r}: [Errno 2] No such file or directory\n"
        )
        sys.exit(2)
    sys.argv = [target, *args]
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    runpy.run_path(path, run_name="__main__")


def _redirect(stdout: str, stderr: str) -> None:
    """/dev/null on stdin, the logs on stdout and stderr; every other fd closed."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    fds = [os.open(os.devnull, os.O_RDONLY), os.open(stdout, flags, 0o666)]
    fds.append(os.open(stderr, flags, 0o666))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            with contextlib.suppress(OSError):  # the listing's own fd, closed already
                os.close(int(name))


def _fail(stderr: str, message: str) -> None:
    try:
        with open(stderr, "a") as f:
            f.write(message + "\n")
    finally:
        os._exit(_JOIN_FAILED)


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _send(fd: int, doc: dict[str, Any]) -> None:
    data = json.dumps(doc).encode() + b"\n"
    while data:
        data = data[os.write(fd, data) :]


if __name__ == "__main__":
    child = main(sys.argv[1:])
    if child is not None:
        become(child)
