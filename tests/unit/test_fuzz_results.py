"""results.json, fuzzed: any file is a Results or one ConfigError line (exit 2 from the
CLI), and whatever parses also renders."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.contract.errors import ConfigError
from reports import write_all
from reports.parse import load_results, results_from_dict

FIXTURE = Path(__file__).parents[1] / "fixtures" / "results" / "run_small.json"
VALID: dict[str, Any] = json.loads(FIXTURE.read_text())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**308, max_value=10**320)
    | st.floats()
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``doc``, tables and arrays alike."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:2]):
            out += _paths(value, (*prefix, i))
    return out


#: The valid document's trials cut to two, so a mutation lands on a stable key often.
BASE = {**VALID, "trials": VALID["trials"][:2]}
PATHS = [p for p in _paths(BASE) if p]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The valid document with a few values replaced by arbitrary JSON, or removed."""
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = doc
        try:
            for step in path[:-1]:
                parent = parent[step]
            if draw(st.booleans()) or isinstance(parent, list):
                parent[path[-1]] = draw(json_values)
            else:
                del parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation took this path away
    return doc


def _one_line(exc: ConfigError) -> None:
    assert str(exc).strip()
    assert "\n" not in str(exc), f"more than one line: {exc}"


def _write(tmp: Path, text: str | bytes) -> Path:
    path = tmp / "results.json"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


@given(st.binary(max_size=200))
@example(b"[" * 100_000)  # json.loads recursed into a RecursionError (found by this test)
@example(b'{"schema": ' + b"9" * 5000 + b"}")  # over int's digit limit: a ValueError
@example(b"\xff\xfe{}")
def test_any_bytes_are_results_or_one_error_line(raw: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        try:
            load_results(_write(Path(d), raw))
        except ConfigError as exc:
            _one_line(exc)


@given(json_values)
def test_any_json_value_is_results_or_one_error_line(value: object) -> None:
    try:
        results_from_dict(value)
    except ConfigError as exc:
        _one_line(exc)


@given(mutated())
@example({**BASE, "duration_s": 10**400})  # float() of a huge int: OverflowError
@example({**BASE, "trials": [{**BASE["trials"][0], "duration_s": 10**400}]})
def test_a_mutated_record_parses_and_renders_or_is_one_error_line(doc: dict[str, Any]) -> None:
    try:
        results = results_from_dict(doc)
    except ConfigError as exc:
        _one_line(exc)
        return
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        write_all(results, Path(d))
        assert load_results(Path(d) / "results.json") == results, "what it writes it reads"


def test_the_fixture_parses() -> None:
    """The mutations start from it: were it invalid, every example would be an error."""
    assert len(results_from_dict(BASE).trials) == 2


@settings(max_examples=25)
@given(st.sampled_from(["report", "replay"]), mutated() | json_values)
@example("replay", [])
@example("replay", {**BASE, "trials": [{"id": "x", "verdict": "violated"}]})  # KeyError
def test_the_cli_reads_a_bad_record_as_one_line_and_exit_2(command: str, doc: object) -> None:
    """``crashpoint report`` and ``replay`` on a record that does not parse; a record that
    does is left alone here (replaying it would run trials)."""
    try:
        results_from_dict(doc)
    except ConfigError:
        pass
    else:
        if command == "replay":
            return
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        path = _write(Path(d), json.dumps(doc))
        args = [command, str(path), "--out", str(Path(d) / "out")]
        result = CliRunner().invoke(main, args)
    if result.exit_code == 0:
        return  # report of a record that parses
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_replay_line_that_does_not_parse_is_one_line_and_exit_2() -> None:
    """shlex.split raised ValueError out of `crashpoint replay` (found by this file)."""
    for line in ("crashpoint run 'x", "rm -rf /"):
        trial = {**BASE["trials"][0], "verdict": "violated", "replay": line}
        with tempfile.TemporaryDirectory(prefix="cp-") as d:
            path = _write(Path(d), json.dumps({**BASE, "trials": [trial]}))
            result = CliRunner().invoke(main, ["replay", str(path), "--out", f"{d}/out"])
            assert not (Path(d) / "out").exists(), "nothing ran"
        assert result.exit_code == 2, result.output
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "replay" in result.stderr
