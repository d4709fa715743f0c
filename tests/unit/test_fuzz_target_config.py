"""crashpoint.toml, fuzzed: any document is a config or one ConfigError line, nothing else."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from harness.cli import main
from harness.contract.errors import ConfigError
from harness.targets.config import (
    DOCKER_KEYS,
    MOUNT_KEYS,
    TARGET_KEYS,
    CommandConfig,
    config_from_data,
    load_config,
)

#: What tomllib can hand back, nested.
scalars = (
    st.text(max_size=12)
    | st.integers()
    | st.floats()
    | st.booleans()
    | st.datetimes()
    | st.datetimes(timezones=st.just(dt.UTC))
    | st.dates()
    | st.times()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
keys = st.sampled_from((*TARGET_KEYS, *DOCKER_KEYS, *MOUNT_KEYS, "kind", "dsn")) | st.text(
    max_size=8
)

VALID: dict[str, Any] = {
    "target": {
        "name": "billing-agent",
        "command": ["node", "worker.js"],
        "workers": 2,
        "lease_ttl_s": 1.0,
        "enqueue": ["node", "enqueue.js", "{job_id}", "{payload_file}"],
        "max_attempts": 3,
        "status": ["node", "status.js", "{job_id}"],
        "ledger": {"dsn": "sqlite:///state/ledger.db"},
        "docker": {"image": "billing:1", "env": {"A": "b"}, "mounts": ["/tmp:/x:ro"]},
    },
    "providers": [{"name": "billing", "kind": "idempotent"}],
}


def _where(doc: Any, path: list[str]) -> dict[str, Any] | None:
    """The table at ``path`` in ``doc`` (None when something on the way is no table)."""
    for key in path:
        if isinstance(doc, list):
            doc = doc[0] if doc else None
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc if isinstance(doc, dict) else None


tables = st.sampled_from(
    [[], ["target"], ["target", "ledger"], ["target", "docker"], ["providers"]]
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The valid document with a few keys set to arbitrary values, or removed."""
    import copy

    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        table = _where(doc, draw(tables))
        if table is None:
            continue
        key = draw(keys)
        if draw(st.booleans()):
            table[key] = draw(values)
        else:
            table.pop(key, None)
    return doc


def _judge(check: Any) -> None:
    try:
        config = check()
    except ConfigError as exc:
        message = str(exc)
        assert message.strip()
        assert "\n" not in message, f"more than one line: {message!r}"
        return
    assert isinstance(config, CommandConfig)


@given(mutated())
@example({"target": {"name": "x", "a\nb": 1}})  # a key with a newline split the message
@example({"target": {**VALID["target"], "docker": {"image": "b:1", "env": {"A\n": "b"}}}})
@example({"target": {**VALID["target"], "lease_ttl_s": float("nan")}})
@example({"target": {**VALID["target"], "docker": {"build": "a\x00b"}}})
@example({"target": {**VALID["target"], "workers": 10**400}})
def test_any_document_is_a_config_or_one_error_line(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        _judge(lambda: config_from_data(doc, path=Path(d) / "crashpoint.toml"))


@given(st.dictionaries(keys, values, max_size=4))
def test_any_top_level_is_a_config_or_one_error_line(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        _judge(lambda: config_from_data(doc, path=Path(d) / "crashpoint.toml"))


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
@example(b"[target]\nname = 1\n" + b"a = [" * 2000)
@example(b"\xef\xbb\xbf[target]")
def test_any_file_is_a_config_or_one_error_line(raw: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        path = Path(d) / "crashpoint.toml"
        path.write_bytes(raw)
        _judge(lambda: load_config(path))


@given(st.binary(max_size=200))
def test_any_pyproject_is_a_config_or_one_error_line(raw: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        path = Path(d) / "pyproject.toml"
        path.write_bytes(b"[tool.crashpoint]\n" + raw)
        _judge(lambda: load_config(path))


def test_the_valid_document_is_valid() -> None:
    """The fuzzers start from it: were it invalid, every example would be an error."""
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        config = config_from_data(VALID, path=Path(d) / "crashpoint.toml")
    assert config.name == "billing-agent"
    assert config.max_attempts == 3


def test_a_trailing_newline_does_not_slip_past_the_patterns() -> None:
    """``re.match(...$)`` matches before a final newline: "A\\n" passed as an environment
    variable name, "billing:1\\n" as an image (found by the fuzzer's examples)."""
    docker: dict[str, Any] = VALID["target"]["docker"]
    for bad in (
        {**docker, "env": {"A\n": "b"}},
        {**docker, "image": "billing:1\n"},
        {**docker, "user": "1000\n"},
    ):
        doc = {**VALID, "target": {**VALID["target"], "docker": bad}}
        with (
            tempfile.TemporaryDirectory(prefix="cp-") as d,
            pytest.raises(ConfigError, match=r"^[^\n]*$"),
        ):
            config_from_data(doc, path=Path(d) / "crashpoint.toml")


def test_check_config_on_a_garbage_file_is_one_line_and_exit_2() -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        path = Path(d) / "crashpoint.toml"
        path.write_bytes(b"\x00[target\nname = = \xff")
        result = CliRunner().invoke(main, ["check-config", "-c", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
