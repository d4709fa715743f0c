"""Workers in the target's own image, against a stand-in engine: names, labels, binds,
environment, the build cache's content hash, and the watchdog's count of backends."""

from __future__ import annotations

import stat
import threading
import uuid
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from harness.backends.docker import (
    BACKEND_LABEL,
    IMAGE_REPO,
    IMAGE_TAG,
    DockerBackend,
    user_binds,
    user_environment,
)
from harness.backends.images import UserImage, check_local, context_hash, prepare
from harness.contract.errors import ConfigError
from harness.targets.command import CommandAdapter
from harness.targets.config import CommandConfig, DockerConfig, Mount, ProviderDecl
from harness.watchdog import RUN_LABEL, _Registry


class FakeContainer:
    def __init__(self, image: str, kwargs: dict[str, Any]) -> None:
        self.image = image
        self.kwargs = kwargs
        self.name = kwargs["name"]
        self.labels = kwargs["labels"]
        self.id = uuid.uuid4().hex * 2
        self.short_id = self.id[:12]
        self.attrs: dict[str, Any] = {"State": {"Pid": 0}}
        self.status = "running"
        self.removed = False
        self._done = threading.Event()

    def reload(self) -> None:
        return None

    def wait(self) -> dict[str, int]:
        self._done.wait()
        return {"StatusCode": 0}

    def logs(self, *, stdout: bool, stderr: bool) -> bytes:
        return b""

    def kill(self, signal: str) -> None:
        self._done.set()

    def remove(self, *, force: bool = False, v: bool = False) -> None:
        assert v, "anonymous volumes must go with the container"
        self.removed = True
        self._done.set()


class FakeContainers:
    def __init__(self) -> None:
        self.made: list[FakeContainer] = []

    def run(self, image: str, **kwargs: Any) -> FakeContainer:
        # The engine's answer to a name in use: what concurrent trials used to get.
        if any(c.name == kwargs["name"] and not c.removed for c in self.made):
            raise docker.errors.APIError(f"409 Conflict: name {kwargs['name']} in use")
        container = FakeContainer(image, kwargs)
        self.made.append(container)
        return container

    def list(self, *, all: bool, filters: dict[str, str], ignore_removed: bool) -> list[Any]:
        key, _, value = filters["label"].partition("=")
        return [c for c in self.made if not c.removed and c.labels.get(key) == value]


class FakeImages:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def get(self, ref: str) -> Any:
        if ref not in self.ids:
            raise docker.errors.ImageNotFound(f"no such image: {ref}")
        return type("Image", (), {"id": self.ids[ref]})()


class FakeClient:
    def __init__(self) -> None:
        self.containers = FakeContainers()
        self.images = FakeImages({f"{IMAGE_REPO}:{IMAGE_TAG}": "sha256:base"})

    def close(self) -> None:
        return None


def image(tmp_path: Path, **settings: Any) -> UserImage:
    return UserImage(
        ref="crashpoint-build:0123456789abcdef",
        settings=DockerConfig(build=tmp_path, **settings),
        config_path=tmp_path / "crashpoint.toml",
    )


def test_two_trials_of_one_run_start_the_same_worker_without_a_name_collision(
    tmp_path: Path,
) -> None:
    client = FakeClient()
    first = DockerBackend(client=client, run_id="run1")
    second = DockerBackend(client=client, run_id="run1")
    a = first.start("w1", ["true"], env={}, cwd=tmp_path)
    b = second.start("w1", ["true"], env={}, cwd=tmp_path)
    made = client.containers.made
    assert made[0].name != made[1].name
    assert {c.labels[RUN_LABEL] for c in made} == {"run1"}
    assert made[0].labels[BACKEND_LABEL] == first.instance != second.instance
    # One trial's close reaps its own containers, never those of a trial still running.
    first.close()
    assert made[0].removed
    assert not made[1].removed
    assert b.alive()
    second.close()
    assert made[1].removed
    assert not a.alive()


def test_a_worker_in_the_target_image_sees_only_its_trial(tmp_path: Path) -> None:
    state = tmp_path / "trial"
    state.mkdir()
    fixtures = tmp_path / "fixtures"
    mine = image(
        tmp_path,
        env=(("LOG_LEVEL", "debug"),),
        workdir="/app",
        mounts=(Mount(fixtures, "/fixtures", read_only=True),),
        user="1000:1000",
    )
    client = FakeClient()
    backend = DockerBackend(client=client, run_id="run1", image=mine)
    env = {
        "PATH": "/host/only/bin",
        "PYTHONPATH": "/work/tree",
        "CRASHPOINT_WORKER_ID": "w1",
        "CRASHPOINT_STATE_DIR": str(state),
        "CRASHPOINT_FAILPOINTS": str(state / "failpoints.sock"),
        "CRASHPOINT_PROVIDER_BILLING_URL": "http://127.0.0.1:4567",
    }
    backend.start("w1", ["node", "worker.js"], env=env, cwd=state)
    (made,) = client.containers.made
    assert made.image == mine.ref
    assert made.kwargs["environment"] == {
        "CRASHPOINT_WORKER_ID": "w1",
        "CRASHPOINT_STATE_DIR": str(state),
        "CRASHPOINT_FAILPOINTS": str(state / "failpoints.sock"),
        "CRASHPOINT_PROVIDER_BILLING_URL": "http://127.0.0.1:4567",
        "LOG_LEVEL": "debug",
    }
    # The socket is in the state directory: one bind serves both.
    assert made.kwargs["volumes"] == [
        f"{state.resolve()}:{state.resolve()}:rw",
        f"{fixtures}:/fixtures:ro",
    ]
    assert (made.kwargs["working_dir"], made.kwargs["user"]) == ("/app", "1000:1000")
    assert made.kwargs["network_mode"] == "host"
    # Another user must be able to write the trial's state.
    assert stat.S_IMODE(state.stat().st_mode) == 0o777
    backend.close()


def test_the_socket_dir_is_bound_too_and_a_host_path_may_be_mounted_twice(
    tmp_path: Path,
) -> None:
    state, sockets = tmp_path / "state", tmp_path / "sockets"
    env = {"CRASHPOINT_STATE_DIR": str(state), "CRASHPOINT_FAILPOINTS": str(sockets / "fp.sock")}
    twice = (Mount(tmp_path, "/a", read_only=True), Mount(tmp_path, "/b"))
    binds = user_binds(state, env, image(tmp_path, mounts=twice))
    assert binds == [
        f"{sockets}:{sockets}:rw",
        f"{state}:{state}:rw",
        f"{tmp_path}:/a:ro",
        f"{tmp_path}:/b:rw",
    ]


def test_without_a_user_the_trial_dir_keeps_its_mode(tmp_path: Path) -> None:
    state = tmp_path / "trial"
    state.mkdir(mode=0o700)
    backend = DockerBackend(client=FakeClient(), run_id="run1", image=image(tmp_path))
    backend.start("w1", ["node"], env={"CRASHPOINT_STATE_DIR": str(state)}, cwd=state)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    backend.close()


def test_the_target_env_never_overrides_the_trial() -> None:
    mine = UserImage("w:1", DockerConfig(image="w:1", env=(("A", "1"),)), Path("x.toml"))
    assert user_environment({"CRASHPOINT_X": "y", "HOME": "/root"}, mine) == {
        "CRASHPOINT_X": "y",
        "A": "1",
    }


def context(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile").write_text("FROM crashpoint-debian-node:1\nCOPY *.js /app/\n")
    (tmp_path / "worker.js").write_text("console.log(1)\n")
    (tmp_path / "notes.txt").write_text("left out\n")
    (tmp_path / ".dockerignore").write_text("# not sent\nnotes.txt\n")
    return tmp_path


def test_the_build_hash_follows_what_the_build_sees(tmp_path: Path) -> None:
    root = context(tmp_path)
    first = context_hash(root)
    assert len(first) == 16
    assert context_hash(root) == first
    (root / "notes.txt").write_text("ignored by .dockerignore\n")
    assert context_hash(root) == first
    (root / "worker.js").write_text("console.log(2)\n")
    second = context_hash(root)
    assert second != first
    (root / "worker.js").chmod(0o700)
    assert context_hash(root) not in (first, second)


class ImagesClient:
    def __init__(self, ids: dict[str, str]) -> None:
        self.images = FakeImages(ids)


def test_the_build_hash_changes_with_the_base_image(tmp_path: Path) -> None:
    root = context(tmp_path)
    old = context_hash(root, ImagesClient({"crashpoint-debian-node:1": "sha256:aaa"}))
    new = context_hash(root, ImagesClient({"crashpoint-debian-node:1": "sha256:bbb"}))
    assert old != new


def test_a_build_already_made_is_reused(tmp_path: Path) -> None:
    root = context(tmp_path)
    ref = f"crashpoint-build:{context_hash(root)}"
    config = command_config(tmp_path, DockerConfig(build=root))
    # The stand-in has no build method: reaching for one would fail the test.
    prepared = prepare(config, ImagesClient({ref: "sha256:ccc"}))
    assert prepared is not None
    assert prepared.ref == ref


def test_a_missing_local_image_is_a_config_error_naming_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "crashpoint.toml"
    with pytest.raises(ConfigError) as info:
        check_local("billing-worker:1", ImagesClient({}), config_path=path)
    message = str(info.value)
    assert message.startswith(f'{path}: target.docker.image "billing-worker:1" is not in')
    assert "crashpoint never pulls" in message


def command_config(tmp_path: Path, docker: DockerConfig | None) -> CommandConfig:
    return CommandConfig(
        path=tmp_path / "crashpoint.toml",
        name="w",
        command=("node", "worker.js"),
        enqueue=("node", "enqueue.js", "{payload_file}"),
        workers=1,
        lease_ttl_s=1.0,
        ledger_dsn=None,
        providers=(ProviderDecl("billing", "idempotent"),),
        docker=docker,
    )


def test_no_docker_table_means_crashpoints_own_image(tmp_path: Path) -> None:
    assert prepare(command_config(tmp_path, None), ImagesClient({})) is None
    assert DockerBackend.for_target(command_config(tmp_path, None)) is DockerBackend
    assert DockerBackend.for_target(None) is DockerBackend


def test_a_command_in_the_image_is_left_as_written(tmp_path: Path) -> None:
    (tmp_path / "worker.js").write_text("")
    config = command_config(tmp_path, DockerConfig(build=tmp_path, workdir="/app"))
    on_host = CommandAdapter(config, trial_dir=tmp_path / "t").worker_argv()
    in_image = CommandAdapter(config, trial_dir=tmp_path / "t", in_image=True).worker_argv()
    assert on_host == ["node", str(tmp_path / "worker.js")]
    assert in_image == ["node", "worker.js"]


def test_the_watchdog_watches_containers_while_any_backend_has_some() -> None:
    registry = _Registry("run1")
    registry.apply({"op": "containers"})
    registry.apply({"op": "containers"})
    registry.apply({"op": "forget_containers"})
    assert registry.containers, "one trial's close must not end the watch over another's"
    registry.apply({"op": "forget_containers"})
    registry.apply({"op": "forget_containers"})
    assert not registry.containers
