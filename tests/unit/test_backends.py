"""The backend seam without starting anything: exit descriptions, binds, the base image."""

from __future__ import annotations

import io
import signal
import tarfile
from pathlib import Path

import pytest

from harness.backends import Backend, describe_exit, get_backend
from harness.backends.base import signal_name
from harness.backends.docker import DockerBackend, _root_tar, host_binds
from harness.backends.process import ProcessBackend
from harness.contract.errors import ConfigError


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (None, "running"),
        (0, "exit 0"),
        (3, "exit 3"),
        (-9, "killed by SIGKILL"),
        (-200, "killed by signal 200"),
    ],
)
def test_describe_exit(code: int | None, text: str) -> None:
    assert describe_exit(code) == text


def test_signal_name() -> None:
    assert signal_name(signal.SIGSTOP) == "SIGSTOP"
    assert signal_name(999) == "999"


def test_get_backend_names_both_and_rejects_others() -> None:
    assert isinstance(get_backend("process"), ProcessBackend)
    assert isinstance(get_backend("docker"), DockerBackend)  # lazy: no engine contacted
    with pytest.raises(ConfigError, match=r"'vm'.*'process' or 'docker'"):
        get_backend("vm")


def test_both_backends_satisfy_the_protocol() -> None:
    assert isinstance(ProcessBackend(), Backend)
    assert isinstance(DockerBackend(), Backend)


def test_host_binds_are_read_only_except_the_state_dir(tmp_path: Path) -> None:
    binds = host_binds(tmp_path, {"/opt/tool": "/opt/tool"})
    assert binds[str(tmp_path)] == {"bind": str(tmp_path), "mode": "rw"}
    assert binds["/usr"]["mode"] == "ro"
    assert binds["/etc"]["mode"] == "ro"
    assert binds["/opt/tool"]["mode"] == "ro"
    repo = Path(__file__).resolve().parents[2]
    assert any(repo.is_relative_to(p) for p in binds), "the repository must be visible inside"
    # No bind nested inside another read-only bind (the engine would mount both).
    ro = [Path(p) for p, b in binds.items() if b["mode"] == "ro"]
    assert not [a for a in ro for b in ro if a != b and a.is_relative_to(b)]


def test_base_image_has_a_real_sbin_and_usr_symlinks() -> None:
    with tarfile.open(fileobj=io.BytesIO(_root_tar())) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["sbin"].isdir(), "init=True mounts docker-init into a real /sbin"
    assert members["lib64"].issym()
    assert members["lib64"].linkname == "usr/lib64"
    assert members["tmp"].mode == 0o1777


def test_watchdog_registry_keeps_only_what_was_not_forgotten() -> None:
    from harness.watchdog import _Registry

    registry = _Registry("run1")
    for message in (
        {"op": "group", "pgid": 10, "ctime": 1.5},
        {"op": "group", "pgid": 11, "ctime": None},
        {"op": "forget_group", "pgid": 10},
        {"op": "containers"},
        {"op": "dir", "path": "/tmp/a"},
        {"op": "dir", "path": "/tmp/b"},
        {"op": "forget_dir", "path": "/tmp/a"},
        {"op": "unknown-op"},  # a newer harness must not break an older watchdog
    ):
        registry.apply(message)
    assert registry.groups == {11: None}
    assert registry.containers
    assert registry.dirs == {"/tmp/b"}
    registry.apply({"op": "forget_containers"})
    assert not registry.containers
