"""``[target.docker]``: the image the workers run in under ``--backend docker``, its
environment, working directory, user and mounts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.targets.config_reader import ENV_NAME, EXAMPLES, TableReader, shown, toml_type

DOCKER_KEYS = ("image", "build", "env", "workdir", "mounts", "user")
MOUNT_KEYS = ("source", "target", "read_only")
DOCKERFILE = "Dockerfile"
#: A local image: ``name[:tag][@digest]`` as Docker spells it, or an image id.
_IMAGE_REF = re.compile(
    r"^(?:sha256:[0-9a-f]{64}|[0-9a-f]{12,64}|"
    r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?)$"
)
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")


@dataclass(frozen=True)
class Mount:
    """A host path bound into the worker's container (``source`` is absolute)."""

    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DockerConfig:
    """``[target.docker]``: the image the workers run in under ``--backend docker``.

    Exactly one of ``image`` (a local image) and ``build`` (an absolute directory holding
    a Dockerfile) is set.
    """

    image: str | None = None
    build: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    mounts: tuple[Mount, ...] = ()
    user: str | None = None


class DockerSchema(TableReader):
    """The ``[target.docker]`` part of the schema."""

    def docker(self, value: object) -> DockerConfig | None:
        docker = self.subtable(value, "docker", DOCKER_KEYS)
        if docker is None:
            return None
        where = "target.docker."
        if "image" in docker and "build" in docker:
            raise self.fail(
                "target.docker",
                "sets both image and build",
                "keep image for a local image, or build for a directory with a Dockerfile",
            )
        image = self.optional(
            docker,
            where,
            "image",
            _IMAGE_REF.fullmatch,
            "is not an image reference",
            f"name a local image like {EXAMPLES['image']} (lower-case name, then :tag)",
        )
        build = self.build_dir(docker) if image is None and "build" in docker else None
        if image is None and build is None:
            raise self.fail(
                "target.docker",
                "names no image",
                f"add image = {EXAMPLES['image']} or build = {EXAMPLES['build']}",
            )
        workdir = self.optional(
            docker,
            where,
            "workdir",
            lambda v: v.startswith("/"),
            "is not an absolute path in the container",
            f"write workdir = {EXAMPLES['workdir']}",
        )
        user = self.optional(
            docker,
            where,
            "user",
            _USER.fullmatch,
            "is not a user",
            f"write a name, uid or uid:gid, like user = {EXAMPLES['user']}",
        )
        return DockerConfig(
            image=image,
            build=build,
            env=self.docker_env(docker.get("env", {})),
            workdir=workdir,
            mounts=self.mounts(docker.get("mounts", [])),
            user=user,
        )

    def build_dir(self, docker: Mapping[str, Any]) -> Path:
        raw = self.string(docker, "target.docker.", "build")
        build = self.base_dir / raw
        if not build.is_dir():
            raise self.fail(
                "target.docker.build",
                f"{shown(raw)} is not a directory ({build})",
                "name the directory holding the Dockerfile, relative to this file",
            )
        if not (build / DOCKERFILE).is_file():
            raise self.fail(
                "target.docker.build",
                f"{shown(raw)} has no {DOCKERFILE} ({build / DOCKERFILE})",
                f"add a {DOCKERFILE} there, or name the directory that has one",
            )
        return build.resolve()

    def docker_env(self, env: object) -> tuple[tuple[str, str], ...]:
        key = "target.docker.env"
        if not isinstance(env, dict):
            raise self.wrong("target.docker.", "env", env, "a table of strings")
        out = []
        for name, value in env.items():
            if not ENV_NAME.fullmatch(name):
                raise self.fail(
                    key,
                    f"names {shown(name)}, which is not an environment variable",
                    "use letters, digits and _ (not first a digit), like LOG_LEVEL",
                )
            if name.startswith("CRASHPOINT_"):
                raise self.fail(
                    f"{key}.{name}",
                    "is set by the harness itself",
                    "leave CRASHPOINT_* out; the worker gets them from each trial",
                )
            if not isinstance(value, str):
                raise self.fail(
                    f"{key}.{name}",
                    f"must be a string, got {shown(value)} ({toml_type(value)})",
                    f'quote it: {name} = "{value}"',
                )
            out.append((name, value))
        return tuple(out)

    def mounts(self, mounts: object) -> tuple[Mount, ...]:
        if not isinstance(mounts, list):
            raise self.wrong("target.docker.", "mounts", mounts, "an array")
        out: list[Mount] = []
        for i, entry in enumerate(mounts):
            where = f"target.docker.mounts[{i}]"
            if isinstance(entry, str):
                mount = self.mount_string(where, entry)
            elif isinstance(entry, dict):
                mount = self.mount_table(where, entry)
            else:
                raise self.fail(
                    where,
                    f"must be a string or a table, got {shown(entry)}",
                    'write "host:container[:ro]" or { source = "...", target = "..." }',
                )
            if any(m.target == mount.target for m in out):
                raise self.fail(
                    where,
                    f"mounts {shown(mount.target)} a second time",
                    "give each mount its own container path",
                )
            out.append(mount)
        return tuple(out)

    def mount_string(self, where: str, entry: str) -> Mount:
        parts = entry.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]):
            raise self.fail(
                where,
                f"{shown(entry)} is not host:container[:ro]",
                'write it like "./fixtures:/fixtures:ro", or as a table',
            )
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise self.fail(
                where, f"{shown(entry)} has mode {shown(mode)}", "end it with :ro or :rw"
            )
        return self.mount(where, parts[0], parts[1], read_only=mode == "ro")

    def mount_table(self, where: str, entry: Mapping[str, Any]) -> Mount:
        self.known(entry, f"{where}.", MOUNT_KEYS, label="a mount")
        source = self.string(entry, f"{where}.", "source", example='"./fixtures"')
        target = self.string(entry, f"{where}.", "target", example='"/fixtures"')
        read_only = entry.get("read_only", False)
        if not isinstance(read_only, bool):
            raise self.wrong(f"{where}.", "read_only", read_only, "true or false", example="true")
        return self.mount(where, source, target, read_only=read_only)

    def mount(self, where: str, source: str, target: str, *, read_only: bool) -> Mount:
        host = (self.base_dir / source).resolve()
        if not host.exists():
            raise self.fail(
                where,
                f"host path {shown(source)} does not exist ({host})",
                "create it, or fix the path (relative paths start at this file)",
            )
        if not target.startswith("/"):
            raise self.fail(
                where,
                f"container path {shown(target)} is not absolute",
                "write it from the container's root, like /fixtures",
            )
        return Mount(source=host, target=target, read_only=read_only)
