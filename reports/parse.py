"""Read ``results.json`` into the model, with one-line errors naming file, key and value.

Unknown keys are kept (``extra``) because docs/results.md allows writers to add keys;
missing or mistyped *stable* keys are errors, since every renderer depends on them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import RESULTS_SCHEMA, Verdict
from reports.model import (
    Evidence,
    KillMatrix,
    MutantResult,
    Results,
    Target,
    TimelineEvent,
    TrialRow,
    ViolationRow,
)

T = TypeVar("T")
_VERDICTS = frozenset(v.value for v in Verdict)

_RESULTS_KEYS = frozenset(
    {
        "schema",
        "run_id",
        "command",
        "seed",
        "started_at",
        "finished_at",
        "duration_s",
        "target",
        "environment",
        "trials",
        "summary",
        "kill_matrix",
        "merged_from",
    }
)
_TRIAL_KEYS = frozenset(
    {
        "id",
        "scenario",
        "injection_point",
        "provider",
        "signal",
        "backend",
        "ledger",
        "mutant",
        "verdict",
        "reached",
        "reason",
        "violations",
        "warnings",
        "duration_s",
        "seed",
        "replay",
        "description",
        "expected",
        "events",
        "timings",
        "run_id",
    }
)
_EVIDENCE_KEYS = frozenset({"arrivals", "effects", "ledger", "events"})
_MISSING = object()
#: The largest float; a bigger integer would raise OverflowError in float().
_FLOAT_MAX = sys.float_info.max


class _Reader:
    """Typed accessors that turn a bad value into a ConfigError naming its JSON path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> NoReturn:
        raise ConfigError(
            f"{self.source}: {where}: {problem}; "
            "fix or regenerate the file (schema in docs/results.md)"
        )

    def obj(self, value: object, where: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {_show(value)}")
        return cast(Mapping[str, Any], value)

    def get(self, data: Mapping[str, Any], key: str, where: str, kind: type[T]) -> T:
        value = data.get(key, _MISSING)
        if value is _MISSING:
            self.fail(_join(where, key), "required key is missing")
        return self.check(value, _join(where, key), kind)

    def opt(self, data: Mapping[str, Any], key: str, where: str, kind: type[T]) -> T | None:
        value = data.get(key)
        return None if value is None else self.check(value, _join(where, key), kind)

    def check(self, value: object, where: str, kind: type[T]) -> T:
        ok = isinstance(value, kind)
        # JSON has one number type: accept an int where a float is wanted, but never a
        # bool (a bool is an int in Python, and `"reached": 1` is a writer bug).
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > _FLOAT_MAX:
                self.fail(where, f"expected a number, got an integer of {value.bit_length()} bits")
            return cast(T, float(value))
        if isinstance(value, bool) and kind is not bool:
            ok = False
        if not ok:
            self.fail(where, f"expected {_type_name(kind)}, got {_show(value)}")
        return cast(T, value)

    def array(self, data: Mapping[str, Any], key: str, where: str) -> list[Any]:
        value = data.get(key)
        if value is None:
            return []
        return self.check(value, _join(where, key), list)

    def strings(self, data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        items = self.array(data, key, where)
        return tuple(self.check(v, f"{_join(where, key)}[{i}]", str) for i, v in enumerate(items))


def load_results(path: str | Path) -> Results:
    """Read and validate one ``results.json``; raise ConfigError naming file and key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read results ({exc.strerror}); check the path") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); pass the results.json a run wrote"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); "
            "pass the results.json a run wrote"
        ) from exc
    except (ValueError, RecursionError) as exc:
        # Valid JSON that Python will not load: an integer past its digit limit, or
        # arrays nested deeper than the parser's recursion (no writer of ours makes either).
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ConfigError(
            f"{path}: JSON that cannot be read ({problem}); pass the results.json a run wrote"
        ) from None
    return results_from_dict(data, source=str(path))


def results_from_dict(data: object, *, source: str = "<results>") -> Results:
    r = _Reader(source)
    top = r.obj(data, "results")
    schema = r.get(top, "schema", "", str)
    if schema != RESULTS_SCHEMA:
        r.fail("schema", f"expected {RESULTS_SCHEMA!r}, got {schema!r}")
    for key in ("run_id", "target", "trials"):
        if key not in top:
            r.fail(key, "required key is missing")
    target = r.obj(top["target"], "target")
    trials = tuple(
        _trial(r, item, f"trials[{i}]") for i, item in enumerate(r.array(top, "trials", ""))
    )
    if "summary" in top:
        # The summary is recomputed from the trials (model.Results.summary); only its
        # shape is checked here so a hand-edited count cannot disagree with the trials.
        r.obj(top["summary"], "summary")
    environment = r.obj(top.get("environment", {}), "environment")
    env: dict[str, str | None] = {}
    for key, value in environment.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # a version written as a number is still a version
        if value is not None and not isinstance(value, str):
            r.fail(f"environment.{key}", f"expected a version string or null, got {_show(value)}")
        env[key] = value
    kill = top.get("kill_matrix")
    _unique_keys(r, trials)
    return Results(
        run_id=r.get(top, "run_id", "", str),
        seed=r.opt(top, "seed", "", int),
        target=Target(
            name=r.get(target, "name", "target", str),
            kind=r.opt(target, "kind", "target", str) or r.get(target, "name", "target", str),
            mutant=r.opt(target, "mutant", "target", str),
            extra={k: v for k, v in target.items() if k not in ("name", "kind", "mutant")},
        ),
        trials=trials,
        environment=env,
        command=r.opt(top, "command", "", str),
        started_at=r.opt(top, "started_at", "", str),
        finished_at=r.opt(top, "finished_at", "", str),
        duration_s=r.opt(top, "duration_s", "", float),
        kill_matrix=None if kill is None else _kill_matrix(r, kill),
        merged_from=r.strings(top, "merged_from", ""),
        extra={k: v for k, v in top.items() if k not in _RESULTS_KEYS},
    )


def _trial(r: _Reader, value: object, where: str) -> TrialRow:
    data = r.obj(value, where)
    verdict = r.get(data, "verdict", where, str)
    if verdict not in _VERDICTS:
        r.fail(f"{where}.verdict", f"expected one of {', '.join(Verdict)}, got {verdict!r}")
    events = tuple(
        _event(r, item, i, f"{where}.events[{i}]")
        for i, item in enumerate(r.array(data, "events", where))
    )
    violations = tuple(
        _violation(r, item, f"{where}.violations[{i}]", len(events))
        for i, item in enumerate(r.array(data, "violations", where))
    )
    warnings = tuple(
        _violation(r, item, f"{where}.warnings[{i}]", len(events), name="warning")
        for i, item in enumerate(r.array(data, "warnings", where))
    )
    timings = r.obj(data.get("timings", {}), f"{where}.timings")
    return TrialRow(
        id=r.get(data, "id", where, str),
        scenario=r.get(data, "scenario", where, str),
        injection_point=r.get(data, "injection_point", where, str),
        provider=r.get(data, "provider", where, str),
        signal=r.opt(data, "signal", where, str),
        backend=r.get(data, "backend", where, str),
        ledger=r.get(data, "ledger", where, str),
        mutant=r.opt(data, "mutant", where, str),
        verdict=Verdict(verdict),
        reached=r.get(data, "reached", where, bool),
        duration_s=r.get(data, "duration_s", where, float),
        replay=r.get(data, "replay", where, str),
        reason=r.opt(data, "reason", where, str),
        violations=violations,
        warnings=warnings,
        seed=r.opt(data, "seed", where, int),
        description=r.opt(data, "description", where, str),
        expected=r.opt(data, "expected", where, str),
        events=events,
        timings={k: r.check(v, f"{where}.timings.{k}", float) for k, v in timings.items()},
        run_id=r.opt(data, "run_id", where, str),
        extra={k: v for k, v in data.items() if k not in _TRIAL_KEYS},
    )


def _event(r: _Reader, value: object, index: int, where: str) -> TimelineEvent:
    data = r.obj(value, where)
    # Negative times are kept: a provider's clock reading from just before the trial's
    # t0 is still a real event, and the timeline axis extends left to show it.
    t = r.get(data, "t", where, float)
    if t != t or t in (float("inf"), float("-inf")):
        r.fail(f"{where}.t", f"expected seconds since the trial started, got {t!r}")
    return TimelineEvent(
        index=index,
        t=t,
        source=r.get(data, "source", where, str),
        kind=r.get(data, "kind", where, str),
        job=r.opt(data, "job", where, str),
        attempt=r.opt(data, "attempt", where, int),
        fields=dict(r.obj(data.get("fields", {}), f"{where}.fields")),
    )


def _violation(
    r: _Reader, value: object, where: str, n_events: int, *, name: str = "invariant"
) -> ViolationRow:
    data = r.obj(value, where)
    evidence = r.obj(data.get("evidence", {}), f"{where}.evidence")
    ew = f"{where}.evidence"
    indexes = []
    for i, item in enumerate(r.array(evidence, "events", ew)):
        index = r.check(item, f"{ew}.events[{i}]", int)
        if not 0 <= index < n_events:
            r.fail(
                f"{ew}.events[{i}]",
                f"event index {index} is outside the trial's {n_events} events",
            )
        indexes.append(index)
    return ViolationRow(
        invariant=r.get(data, name, where, str),
        job=r.opt(data, "job", where, str),
        message=r.opt(data, "message", where, str) or "",
        evidence=Evidence(
            arrivals=_rows(r, evidence, "arrivals", ew),
            effects=_rows(r, evidence, "effects", ew),
            ledger=_rows(r, evidence, "ledger", ew),
            events=tuple(indexes),
            extra={k: v for k, v in evidence.items() if k not in _EVIDENCE_KEYS},
        ),
    )


def _rows(r: _Reader, data: Mapping[str, Any], key: str, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(
        dict(r.obj(row, f"{where}.{key}[{i}]")) for i, row in enumerate(r.array(data, key, where))
    )


def _kill_matrix(r: _Reader, value: object) -> KillMatrix:
    data = r.obj(value, "kill_matrix")
    mutants = r.obj(data.get("mutants", {}), "kill_matrix.mutants")
    out = []
    for name, item in mutants.items():
        where = f"kill_matrix.mutants.{name}"
        m = r.obj(item, where)
        out.append(
            MutantResult(
                name=name,
                description=r.opt(m, "description", where, str) or "",
                expected_invariant=r.opt(m, "expected_invariant", where, str),
                killed=r.get(m, "killed", where, bool),
                by=r.strings(m, "by", where),
                invariants=r.strings(m, "invariants", where),
            )
        )
    correct = r.obj(data.get("correct_worker", {}), "kill_matrix.correct_worker")
    return KillMatrix(
        mutants=tuple(out),
        correct_trials=r.opt(correct, "trials", "kill_matrix.correct_worker", int),
        correct_violations=r.opt(correct, "violations", "kill_matrix.correct_worker", int),
        mode=r.opt(data, "mode", "kill_matrix", str),
    )


def _unique_keys(r: _Reader, trials: tuple[TrialRow, ...]) -> None:
    seen: dict[str, int] = {}
    for i, trial in enumerate(trials):
        if trial.key in seen:
            r.fail(
                f"trials[{i}].id",
                f"duplicate trial id {trial.key!r} (first at trials[{seen[trial.key]}])",
            )
        seen[trial.key] = i


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_name(kind: type) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(kind, "an array" if kind is list else kind.__name__)


def _show(value: object) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."
