"""Workers as Docker containers, on an image built here from an empty root.

No registry is reachable, so the image is an imported tar holding only mount points and
the symlinks a Debian root has (``bin``, ``lib``, ``lib64`` into ``usr``); ``/usr``,
``/etc``, the Python installation and the repository are bound read-only from the host,
and the trial's state directory read-write at the same path, so the worker sees the same
paths inside as outside. ``/sbin`` is a real directory because ``init=True`` mounts
``docker-init`` there. Containers use the host network to reach loopback providers.

Containment is the container (``containment="container"`` on each ``worker_start``): a
worker that double-forks, calls ``setsid`` or ignores SIGTERM stays inside its PID
namespace and cgroup, and when the worker (so its init) exits, the kernel kills whatever
was left there.

Signals: SIGKILL goes through the engine (it kills the whole PID namespace); SIGSTOP and
SIGCONT become ``pause()``/``unpause()`` (the cgroup freezer stops every process at
once); any other signal goes through the engine to the init process, which forwards it to
the worker, and from the host to the worker's descendants, as the process backend does.
Exit statuses are reported like :mod:`subprocess`: the engine's ``128+N`` becomes ``-N``
when we sent signal ``N``.

A command target with ``[target.docker]`` runs in its own image instead (see
:mod:`harness.backends.images`): nothing of the host is mounted but the trial's state
directory and the failpoint socket's directory, at the same paths as outside, and the
target's own mounts; the worker gets the trial's ``CRASHPOINT_*`` variables and the
target's ``env``, never the harness's own environment (its ``PATH`` or ``PYTHONPATH``
mean nothing in another root). Loopback provider URLs work because of the host network.

Container names carry the backend's own id besides the run's: concurrent trials of one
run each have a backend and the same worker names, and must not collide.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import site
import sys
import tarfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends.base import (
    Backend,
    WorkerHandle,
)
from harness.backends.cgroup import CONTAINER
from harness.backends.docker_handle import DockerHandle
from harness.backends.images import UserImage
from harness.contract.env import FAILPOINTS, STATE_DIR
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.watchdog import DOCKER_API_TIMEOUT_S, RUN_LABEL, Watchdog

if TYPE_CHECKING:
    from harness.targets.config import CommandConfig

WORKER_LABEL = "crashpoint.worker"
#: Which backend (one per trial) started the container: its close removes only its own.
BACKEND_LABEL = "crashpoint.backend"
_DIRS = ("sbin", "tmp", "proc", "sys", "dev", "root", "etc", "usr", "run", "var/tmp")
_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64"}
IMAGE_REPO = "crashpoint-worker"
#: A ``[target.preload]`` target's ``cold_reason`` here: a container's process is the
#: engine's to start, so none can be forked from the run's zygote.
COLD_IN_CONTAINER = "the docker backend starts every worker in a container of its own"
#: The tag changes whenever the root's layout does, so a stale image is never reused.
IMAGE_TAG = hashlib.sha256(repr((_DIRS, sorted(_LINKS.items()))).encode()).hexdigest()[:12]


def _root_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in _DIRS:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d.endswith("tmp") else 0o755
            tar.addfile(info)
        for name, target in _LINKS.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


def ensure_image(client: Any) -> str:
    """The local base image's reference, imported on first use."""
    import docker.errors

    ref = f"{IMAGE_REPO}:{IMAGE_TAG}"
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        client.api.import_image_from_data(_root_tar(), repository=IMAGE_REPO, tag=IMAGE_TAG)
    return ref


def host_binds(cwd: Path, extra: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Read-only host paths a Python worker needs, plus ``cwd`` read-write."""
    wanted = [Path("/usr"), Path("/etc")]
    py_paths = [sys.prefix, sys.base_prefix, *site.getsitepackages()]
    if Path(site.getusersitepackages()).is_dir():
        py_paths.append(site.getusersitepackages())
    for raw in py_paths:
        path = Path(raw).resolve()
        # A pyenv interpreter is reached through shims under the pyenv root: bind it all.
        parts = path.parts
        if ".pyenv" in parts:
            path = Path(*parts[: parts.index(".pyenv") + 1])
        wanted.append(path)
    wanted.append(Path(__file__).resolve().parents[2])  # the repository checkout
    binds: dict[str, dict[str, str]] = {}
    for path in sorted(set(wanted), key=lambda p: len(p.parts)):
        if not any(path.is_relative_to(Path(b)) for b in binds):
            binds[str(path)] = {"bind": str(path), "mode": "ro"}
    for host, inside in (extra or {}).items():
        binds[str(host)] = {"bind": inside, "mode": "ro"}
    binds[str(cwd)] = {"bind": str(cwd), "mode": "rw"}
    return binds


class DockerBackend:
    """Runs each worker in its own container; :meth:`close` removes them all."""

    name = "docker"

    def __init__(
        self,
        *,
        history: History | None = None,
        watchdog: Watchdog | None = None,
        run_id: str | None = None,
        init: bool = True,
        extra_binds: Mapping[str, str] | None = None,
        client: Any = None,
        image: UserImage | None = None,
        preloading: bool = False,
    ) -> None:
        self._history = history
        #: The target declares ``[target.preload]``, which no container can honour: each
        #: ``worker_start`` says it started cold and why, as a process backend's would.
        self._preloading = preloading
        self._watchdog = watchdog
        self.run_id = run_id or (watchdog.run_id if watchdog else uuid.uuid4().hex[:12])
        #: This backend's own id: in container names and labels, apart from its run's.
        self.instance = uuid.uuid4().hex[:8]
        self.user_image = image
        self._init = init
        self._extra_binds = dict(extra_binds or {})
        self._client = client
        self._image: str | None = None
        self._handles: list[DockerHandle] = []
        self._watching = False

    @classmethod
    def for_target(cls, command: CommandConfig | None) -> Callable[..., DockerBackend]:
        """Makes the run's backends: in the target's own image when it declares
        ``[target.docker]`` (checked or built here, once, before any trial), else in
        crashpoint's image."""
        preloading = command is not None and bool(command.preload)
        if command is None or command.docker is None:
            return functools.partial(cls, preloading=True) if preloading else cls
        from harness.backends.images import prepare

        client = connect()
        try:
            image = prepare(command, client)
        finally:
            client.close()
        return functools.partial(cls, image=image, preloading=preloading)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect()
        return self._client

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
    ) -> DockerHandle:
        import docker.errors

        cwd = Path(cwd).resolve()
        if self._watchdog is not None and not self._watching:
            self._watchdog.watch_containers()
            self._watching = True
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", name)
        run: dict[str, Any] = {
            "command": list(argv),
            "detach": True,
            "name": f"crashpoint-{self.run_id}-{self.instance}-{safe}-{len(self._handles)}",
            "labels": {RUN_LABEL: self.run_id, BACKEND_LABEL: self.instance, WORKER_LABEL: name},
            "network_mode": "host",
            "init": self._init,
        }
        image = self._image_into(run, cwd, env)
        if self._watchdog is not None:
            self._watchdog.creating(run["name"])
        try:
            container = self.client.containers.run(image, **run)
        except docker.errors.DockerException as exc:
            # The engine answered, so no create of this name is on its way any more (a
            # client timeout is no DockerException: that create stays awaited).
            self._remove_named(run["name"])
            if self._watchdog is not None:
                self._watchdog.created(run["name"])
            raise InfrastructureError(
                f"could not start worker {name!r} in a container of {image} "
                f"(argv {list(argv)!r}): {exc}; check `crashpoint doctor` for the Docker engine"
            ) from exc
        if self._watchdog is not None:
            self._watchdog.created(run["name"])  # under the run's label from here on
        handle = DockerHandle(name, container, init=self._init, cwd=cwd, history=self._history)
        self._handles.append(handle)
        if self._history is not None:
            self._history.append(
                f"worker:{name}",
                "worker_start",
                t=handle.started_at,
                worker=name,
                pid=handle.pid,
                backend=self.name,
                argv=list(argv),
                container=container.short_id,
                image=image,
                containment=CONTAINER,
                **self._start_fields(),
            )
        return handle

    def _start_fields(self) -> dict[str, Any]:
        if not self._preloading:
            return {}
        return {"start": "cold", "cold_reason": COLD_IN_CONTAINER}

    def _image_into(self, run: dict[str, Any], cwd: Path, env: Mapping[str, str]) -> str:
        """The image to run and, into ``run``, what differs between crashpoint's own image
        (the host's paths bound read-only, the harness's environment) and the target's
        (only the state directory and its own mounts, its own environment and user)."""
        mine = self.user_image
        if mine is None:
            if self._image is None:
                self._image = ensure_image(self.client)
            run.update(
                environment=dict(env),
                working_dir=str(cwd),
                volumes=host_binds(cwd, self._extra_binds),
            )
            return self._image
        _open_to(mine.settings.user, cwd, env)
        run.update(
            environment=user_environment(env, mine),
            working_dir=mine.settings.workdir or str(cwd),
            volumes=user_binds(cwd, env, mine),
        )
        if mine.settings.user is not None:
            run["user"] = mine.settings.user
        return mine.ref

    def handles(self) -> list[DockerHandle]:
        return list(self._handles)

    def _remove_named(self, container_name: str) -> None:
        """Remove the container a failed start may still have made: a create the client
        gave up on can land in the engine afterwards, under this backend's label."""
        import docker.errors

        with contextlib.suppress(docker.errors.DockerException):
            self.client.containers.get(container_name).remove(force=True, v=True)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every container of this backend and remove any it left (not those of the
        run's other trials, which may be running at this moment)."""
        for handle in self._handles:
            handle.stop(timeout_s)
        if self._client is not None:
            with contextlib.suppress(Exception):
                for leftover in self._client.containers.list(
                    all=True,
                    filters={"label": f"{BACKEND_LABEL}={self.instance}"},
                    ignore_removed=True,
                ):
                    leftover.remove(force=True, v=True)
            self._client.close()
            self._client = None
        if self._watchdog is not None and self._watching:
            self._watchdog.forget_containers()
            self._watching = False

    def __enter__(self) -> DockerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(timeout_s: float = DOCKER_API_TIMEOUT_S) -> Any:
    """A Docker SDK client for the local engine, or :class:`InfrastructureError` saying why."""
    try:
        import docker

        client = docker.from_env(timeout=int(timeout_s), max_pool_size=64)
        client.ping()
    except Exception as exc:
        raise InfrastructureError(
            f"no Docker engine answers ({exc}); run `bash scripts/install-infra.sh docker` "
            "or set DOCKER_HOST"
        ) from exc
    return client


def sweep(run_id: str, client: Any = None) -> int:
    """Remove every container labelled with ``run_id``; how many there were."""
    import docker.errors

    own = client is None
    client = client or connect()
    try:
        # The watchdog may reap the same containers at the same moment.
        found = client.containers.list(
            all=True, filters={"label": f"{RUN_LABEL}={run_id}"}, ignore_removed=True
        )
        for container in found:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
        for volume in client.volumes.list(filters={"label": f"{RUN_LABEL}={run_id}"}):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
        return len(found)
    finally:
        if own:
            client.close()


def user_binds(cwd: Path, env: Mapping[str, str], image: UserImage) -> list[str]:
    """Binds (``host:container:mode``) for a worker in the target's image: the trial's
    state directory and the failpoint socket's directory read-write at the host's paths,
    then the target's mounts (one host path may be mounted at two places)."""
    wanted = [cwd]
    for raw, is_socket in ((env.get(STATE_DIR), False), (env.get(FAILPOINTS), True)):
        if raw:
            path = Path(raw).resolve()
            wanted.append(path.parent if is_socket else path)
    binds: list[Path] = []
    for path in sorted(set(wanted), key=lambda p: (len(p.parts), str(p))):
        if not any(path.is_relative_to(b) for b in binds):
            binds.append(path)
    out = [f"{path}:{path}:rw" for path in binds]
    for mount in image.settings.mounts:
        out.append(f"{mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}")
    return out


def user_environment(env: Mapping[str, str], image: UserImage) -> dict[str, str]:
    """The trial's ``CRASHPOINT_*`` variables and the target's ``env`` (the schema keeps
    ``CRASHPOINT_*`` out of it, so the trial's are never overridden)."""
    out = {k: v for k, v in env.items() if k.startswith("CRASHPOINT_")}
    out.update(image.settings.env)
    return out


def _open_to(user: str | None, cwd: Path, env: Mapping[str, str]) -> None:
    """A worker running as another user must write its state and reach the socket."""
    if user is None or user in ("0", "root") or user.startswith(("0:", "root:")):
        return
    for raw in (str(cwd), env.get(STATE_DIR), env.get(FAILPOINTS)):
        if raw:
            with contextlib.suppress(OSError):
                os.chmod(raw, 0o777)  # noqa: S103 (a per-trial temp dir, removed with the trial)


if TYPE_CHECKING:  # the seam is structural: let the type checker prove conformance
    _backend: type[Backend] = DockerBackend
    _handle: type[WorkerHandle] = DockerHandle
