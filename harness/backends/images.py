"""The image a command target's workers run in, from ``[target.docker]``.

``image`` names a local image: it is checked once, before any trial, and never pulled
(no registry need be reachable). ``build`` names a directory with a Dockerfile: it is
built once per run and tagged ``crashpoint-build:<hash>``, the hash covering every file
the build sees (``.dockerignore`` honoured) and the ids of the images it starts ``FROM``.
A build is a cache, not a thing of the run: it is kept between runs (the next run with
the same context starts at once) and carries no run label, so no reaper removes it; when
a context changes, the builds of its older contents are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError, InfrastructureError
from harness.targets.config import DOCKERFILE, CommandConfig, DockerConfig

BUILD_REPO = "crashpoint-build"
#: On every build: it is a cache kept between runs, never swept with a run.
CACHE_LABEL = "crashpoint.cache"
#: The build directory, so the builds of its older contents can be found and pruned.
CONTEXT_LABEL = "crashpoint.context"
#: A build's RUN steps may take minutes of silence; the usual API timeout is seconds.
BUILD_TIMEOUT_S = 1800
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class UserImage:
    """A ready local image and the settings its workers run with."""

    ref: str
    settings: DockerConfig
    #: The crashpoint.toml it came from, for messages.
    config_path: Path


def prepare(command: CommandConfig | None, client: Any) -> UserImage | None:
    """The target's image, checked or built; None when it declares no ``[target.docker]``.

    A missing image or a failed build is the configuration's problem: a
    :class:`ConfigError` naming the file and key, before any trial starts.
    """
    if command is None or command.docker is None:
        return None
    settings = command.docker
    if settings.build is not None:
        ref = build(settings.build, client, config_path=command.path)
    else:
        assert settings.image is not None
        ref = settings.image
        check_local(ref, client, config_path=command.path)
    return UserImage(ref=ref, settings=settings, config_path=command.path)


def check_local(ref: str, client: Any, *, config_path: Path) -> None:
    import docker.errors

    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise ConfigError(
            f"{config_path}: target.docker.image {json.dumps(ref)} is not in the local Docker "
            "engine; build it (docker build -t REF DIR) or load it (docker load), "
            "crashpoint never pulls"
        ) from None
    except docker.errors.APIError as exc:
        raise InfrastructureError(f"the Docker engine could not look up {ref!r}: {exc}") from exc


def build(directory: Path, client: Any, *, config_path: Path) -> str:
    """Build ``directory`` unless a build of the same content exists; its reference."""
    import docker.errors

    digest = context_hash(directory, client)
    ref = f"{BUILD_REPO}:{digest}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(ref)
        return ref
    where = f"{config_path}: target.docker.build {json.dumps(str(directory))}"
    try:
        image, _ = client.images.build(
            path=str(directory),
            tag=ref,
            labels={CACHE_LABEL: "build", CONTEXT_LABEL: str(directory)},
            rm=True,
            forcerm=True,  # no intermediate container outlives a failed step
            pull=False,  # no registry: FROM names a local image
            network_mode="host",  # the only network an engine without a bridge has
            timeout=BUILD_TIMEOUT_S,
        )
    except docker.errors.BuildError as exc:
        raise ConfigError(
            f"{where} did not build ({_first_line(exc.msg)}); fix the Dockerfile"
        ) from None
    except docker.errors.APIError as exc:
        raise ConfigError(
            f"{where} did not build ({_first_line(str(exc.explanation or exc))}); "
            "fix the Dockerfile, and build its FROM image first if it is not local"
        ) from None
    _prune_older(client, directory, keep=image.id)
    return ref


def _prune_older(client: Any, directory: Path, *, keep: str) -> None:
    """Remove the builds of the directory's earlier contents (in use: left alone)."""
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):
        for old in client.images.list(filters={"label": f"{CONTEXT_LABEL}={directory}"}):
            if old.id != keep:
                for tag in old.tags:
                    with contextlib.suppress(docker.errors.APIError):
                        client.images.remove(tag, noprune=False)


def context_hash(directory: Path, client: Any = None) -> str:
    """What a build of ``directory`` depends on: every file it sends (paths, exec bits,
    contents) and the local ids of its ``FROM`` images; 16 hex digits."""
    from docker.utils.build import exclude_paths

    digest = hashlib.sha256()
    for rel in sorted(exclude_paths(str(directory), _ignored(directory), DOCKERFILE)):
        path = directory / rel
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\n".encode())
        elif path.is_file():
            executable = os.access(path, os.X_OK)
            digest.update(f"F {rel} {int(executable)} {path.stat().st_size}\n".encode())
            digest.update(path.read_bytes())
        elif path.is_dir():
            digest.update(f"D {rel}\n".encode())
    text = (directory / DOCKERFILE).read_text(errors="replace")
    for base in _FROM.findall(text):
        digest.update(f"FROM {base} {_image_id(client, base)}\n".encode())
    return digest.hexdigest()[:16]


def _ignored(directory: Path) -> list[str]:
    ignore = directory / ".dockerignore"
    if not ignore.is_file():
        return []
    lines = (line.strip() for line in ignore.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _image_id(client: Any, ref: str) -> str:
    """The local id of ``ref``; "" for a build stage or an image not here."""
    if client is None:
        return ""
    try:
        return str(client.images.get(ref).id)
    except Exception:
        return ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0][:300] if lines else "no message"
