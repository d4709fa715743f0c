"""Kernel containment for local workers: one cgroup v2 per worker slot.

A process cannot leave its cgroup by forking, double-forking or calling ``setsid``, so
``cgroup.kill`` (SIGKILL to every member in one write), ``cgroup.freeze`` (every member
frozen, children forked later included) and ``cgroup.procs`` (every member, listed)
reach the whole worker tree whatever it does. The worker joins its cgroup before any
code of its own runs: it is started through a one-line ``sh`` shim that writes its own
pid into ``cgroup.procs`` and then execs the worker under the same pid, so not even its
first fork happens outside.

Where cgroup v2 cannot be written (not root, no v2 hierarchy, or
``CRASHPOINT_CONTAINMENT=process_group``), the process backend falls back to process
groups plus the descendants psutil has seen (:mod:`harness.backends.pgroup`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.contract.env import CONTAINMENT
from harness.contract.errors import ConfigError, InfrastructureError

CGROUP2 = "cgroup2"
PROCESS_GROUP = "process_group"
#: What the docker backend records: the engine's container is the boundary.
CONTAINER = "container"
#: The values of ``CRASHPOINT_CONTAINMENT``.
CHOICES = ("auto", CGROUP2, PROCESS_GROUP)
#: Files a worker cgroup must offer (``cgroup.kill`` needs Linux 5.14).
_NEEDED = ("cgroup.procs", "cgroup.kill", "cgroup.freeze", "cgroup.events")
_POLL_S = 0.001
#: Freezing waits for every member to reach the freezer; one stuck in the kernel (an
#: uninterruptible sleep) delays that, and a signal is then delivered all the same.
FREEZE_WAIT_S = 2.0
#: Written by the shim when it cannot join the cgroup: the worker never ran.
JOIN_FAILED = 125


def wanted(value: str | None) -> str:
    """The containment ``CRASHPOINT_CONTAINMENT`` asks for (``auto`` when unset)."""
    choice = (value or "auto").strip()
    if choice not in CHOICES:
        raise ConfigError(
            f"{CONTAINMENT}={value!r} is not a containment; use one of {', '.join(CHOICES)} "
            "(or leave it unset for auto)"
        )
    return choice


def v2_mount(mounts: str) -> Path | None:
    """The cgroup2 mount point in ``/proc/self/mounts`` text, or None."""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1].replace("\\040", " "))
    return None


def own_cgroup(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 path from ``/proc/self/cgroup`` text (its ``0::`` line)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def parse_events(text: str) -> dict[str, int]:
    """``cgroup.events`` (``populated 1``, ``frozen 0``) as a dict."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def enter_argv(procs: Path, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` behind the shim that joins the cgroup whose ``cgroup.procs`` is ``procs``.

    ``sh`` would put its own ``PWD`` into the worker's environment: the shim restores
    the one the caller gave, or removes it, so the worker gets exactly ``env``.
    """
    join = (
        f'echo $$ >"$0" || {{ echo "crashpoint: could not join cgroup $0" >&2; '
        f"exit {JOIN_FAILED}; }}; "
    )
    if "PWD" in env:
        script = join + 'export PWD="$1"; shift; exec "$@"'
        return ["/bin/sh", "-c", script, str(procs), env["PWD"], *argv]
    return ["/bin/sh", "-c", join + 'unset PWD; exec "$@"', str(procs), *argv]


def runnable(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> bool:
    """Whether ``argv[0]`` names a program ``Popen`` could start (found on ``env``'s
    ``PATH``, or a path from ``cwd``): behind the shim, a missing one would be a worker
    exiting 127 rather than a clear failure to start."""
    program = argv[0] if argv else ""
    if not program:
        return False
    if "/" in program:
        path = cwd / program
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


class Cgroup:
    """One cgroup v2 directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def child(self, name: str) -> Cgroup:
        """Make a child cgroup (one worker slot)."""
        path = self.path / name
        path.mkdir()
        return Cgroup(path)

    def procs(self) -> list[int]:
        """Pids of the live members (an exited, unreaped member is not one)."""
        try:
            text = self.procs_file.read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def events(self) -> dict[str, int]:
        try:
            return parse_events((self.path / "cgroup.events").read_text())
        except OSError:
            return {}

    def populated(self) -> bool:
        return self.events().get("populated", 0) == 1

    def frozen(self) -> bool:
        """Asked to be frozen (``cgroup.freeze`` is 1), reached or not."""
        try:
            return (self.path / "cgroup.freeze").read_text().strip() == "1"
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL every member, frozen or not, in one write."""
        self._write("cgroup.kill", "1")

    def freeze(self, timeout_s: float = FREEZE_WAIT_S) -> bool:
        """Freeze every member; True once the kernel says ``frozen 1``."""
        self._write("cgroup.freeze", "1")
        return self._until(lambda e: e.get("frozen") == 1 or not e.get("populated"), timeout_s)

    def thaw(self) -> None:
        self._write("cgroup.freeze", "0")

    def signal(self, sig: int) -> None:
        """Deliver ``sig`` to every member at once: frozen, the member list cannot grow
        while it is read, so a child forked at this moment cannot miss the signal."""
        held = self.frozen()
        if not held:
            self.freeze()
        try:
            for pid in self.procs():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        finally:
            if not held:
                self.thaw()

    def wait_empty(self, timeout_s: float) -> bool:
        return self._until(lambda e: not e.get("populated"), timeout_s)

    def remove(self) -> bool:
        """Remove the directory, and any cgroups the worker made inside it, deepest first
        (each must be empty of processes); False if one is still in use."""
        inner = [p for p in self.path.glob("**/") if p != self.path] if self.path.exists() else []
        for sub in sorted(inner, key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    def _write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except FileNotFoundError:
            pass  # removed: nothing left to act on
        except OSError as exc:
            raise InfrastructureError(
                f"could not write {value} to {self.path / name}: {exc}; "
                f"set {CONTAINMENT}=process_group to contain workers without cgroups"
            ) from exc

    def _until(self, done: Callable[[dict[str, int]], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not done(self.events()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True


class CgroupTree:
    """A worker's tree as its cgroup holds it; see :class:`harness.backends.process.Tree`."""

    kind = CGROUP2

    def __init__(self, slot: Cgroup) -> None:
        self.slot = slot

    def send(self, sig: int) -> None:
        if sig == signal.SIGKILL:
            self.slot.kill()
        elif sig == signal.SIGSTOP:
            self.slot.freeze()
        elif sig == signal.SIGCONT:
            self.slot.thaw()
        else:
            self.slot.signal(sig)

    def pids(self) -> list[int]:
        return self.slot.procs()

    def release(self) -> None:
        """Nothing to do: the cgroup, not the leader's pid, names the tree."""

    def settle(self, timeout_s: float) -> bool:
        """Wait until every member is gone, then remove the slot; True if it was."""
        return self.slot.wait_empty(timeout_s) and self.slot.remove()


def open_root(choice: str) -> tuple[Cgroup | None, str]:
    """The backend's own cgroup, made under this process's cgroup, for ``choice`` (see
    :func:`wanted`); or None and the reason the fallback is used."""
    if choice == PROCESS_GROUP:
        return None, f"{CONTAINMENT}={PROCESS_GROUP}"
    try:
        root = _make_root()
    except (OSError, LookupError) as exc:
        if choice == CGROUP2:
            raise InfrastructureError(
                f"{CONTAINMENT}={CGROUP2}, but no cgroup v2 can be made here: {exc}; "
                "run as root on a machine with a cgroup v2 hierarchy, or unset it"
            ) from exc
        return None, f"cgroup v2 not writable: {exc}"
    return root, ""


def _make_root() -> Cgroup:
    mount = v2_mount(Path("/proc/self/mounts").read_text())
    if mount is None:
        raise LookupError("no cgroup2 hierarchy is mounted")
    own = own_cgroup(Path("/proc/self/cgroup").read_text())
    if own is None:
        raise LookupError("this process is in no cgroup v2")
    parent = mount / own.lstrip("/")
    path = parent / f"crashpoint-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    missing = [name for name in _NEEDED if not (path / name).exists()]
    if missing or not os.access(path / "cgroup.procs", os.W_OK):
        path.rmdir()
        raise LookupError(
            f"{path} lacks {', '.join(missing)} (Linux 5.14 or later is needed)"
            if missing
            else f"{path / 'cgroup.procs'} is not writable"
        )
    return Cgroup(path)
