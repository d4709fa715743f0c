"""A fault schedule as data: which jobs and workers, then the faults, in order.

Each fault names a boundary (a failpoint, or a provider event: ``arrival`` before the
provider commits, ``commit`` after it did, ``response`` whose answer is then lost), a hit
count (the 2nd time any worker reaches it, counted from when the fault before it was
done), the action (kill, pause, toxic, provider fault, ledger restore, duplicate
delivery) and the worker it aims at. Three more boundaries are the harness's own:
``start`` (at once), ``settled`` (once every job has ended) and ``time`` (``after_s``
seconds after the workers started: the random baseline's boundary).

A schedule is saved as readable JSON with a schema version (:data:`SCHEMA`) and loaded
with one clear line per mistake (:class:`ConfigError`), so a finding can be committed,
read, edited and replayed. Only the contract is imported: the explorer, the player, the
report and the exported regression tests all read the same data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import PROVIDER_KINDS

SCHEMA = "crashpoint.schedule/1"

FAILPOINTS = (
    "after_claim",
    "before_external_call",
    "after_external_call",
    "after_local_write",
    "before_reconcile",
    "after_reconcile",
)
PROVIDER_EVENTS = ("arrival", "commit", "response")
HARNESS_BOUNDARIES = ("start", "settled", "time")
BOUNDARIES = FAILPOINTS + PROVIDER_EVENTS + HARNESS_BOUNDARIES

ACTIONS = ("kill", "pause", "toxic", "provider_fault", "restore", "duplicate")
SIGNALS = ("SIGKILL", "SIGTERM")
PROVIDER_FAULTS = ("fail_before_commit", "fail_lookup", "delay_response")
TOXICS = ("latency", "timeout", "reset_peer", "slow_close", "bandwidth")
#: The most hits a fault waits for, and the most requests a provider fault acts on.
MAX_COUNT = 100
#: The worker a fault aims at: whoever reached the boundary, or a worker by name.
HITTER = "hitter"

#: The fields each action uses besides ``at``, ``hit``, ``action`` and ``worker``; the
#: JSON carries only these, so a saved schedule says nothing it does not mean.
_ACTION_FIELDS: dict[str, tuple[str, ...]] = {
    "kill": ("signal", "restart"),
    "pause": ("duration_s",),
    "toxic": ("toxic", "attributes", "duration_s"),
    "provider_fault": ("fault", "times", "status", "delay_s"),
    "restore": (),
    "duplicate": (),
}


@dataclass(frozen=True)
class FaultStep:
    """One fault of a schedule (see the module docstring for the boundaries)."""

    at: str
    action: str
    hit: int = 1
    worker: str = HITTER
    #: kill: the signal, and whether a fresh worker takes the dead one's place.
    signal: str = "SIGKILL"
    restart: bool = True
    #: pause: how long the worker stays stopped; toxic: how long the toxic stays on.
    duration_s: float = 0.0
    #: provider_fault: which, how many requests it acts on, its 5xx, delay_response's pause.
    fault: str = "fail_before_commit"
    times: int = 1
    status: int = 503
    delay_s: float = 0.0
    #: toxic: the Toxiproxy toxic on the provider link and its attributes.
    toxic: str = "latency"
    attributes: Mapping[str, int] = field(default_factory=dict)
    #: boundary ``time``: seconds after the workers started.
    after_s: float = 0.0

    def __post_init__(self) -> None:
        _check_step(self, "fault")

    def describe(self) -> str:
        """One line: ``kill SIGKILL at after_external_call (2nd hit)``."""
        what = {
            "kill": f"kill {self.signal}" + ("" if self.restart else " (no restart)"),
            "pause": f"pause {self.duration_s:g} s",
            "toxic": f"toxic {self.toxic} {dict(self.attributes)} for {self.duration_s:g} s",
            "provider_fault": f"{self.fault} x{self.times}"
            + (f" ({self.delay_s:g} s)" if self.fault == "delay_response" else ""),
            "restore": "restore the ledger",
            "duplicate": "deliver the job again",
        }[self.action]
        where = f"{self.after_s:g} s" if self.at == "time" else self.at
        nth = f" ({_ordinal(self.hit)} hit)" if self.hit > 1 else ""
        aim = "" if self.worker == HITTER else f" on {self.worker}"
        return f"{what} at {where}{nth}{aim}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "hit": self.hit, "action": self.action}
        if self.worker != HITTER:
            out["worker"] = self.worker
        if self.at == "time":
            out["after_s"] = self.after_s
        for name in _ACTION_FIELDS[self.action]:
            value = getattr(self, name)
            out[name] = dict(value) if isinstance(value, Mapping) else value
        return out


@dataclass(frozen=True)
class Schedule:
    """Jobs and workers, then the faults in the order they are played."""

    provider: str
    faults: tuple[FaultStep, ...] = ()
    jobs: int = 1
    workers: int = 1
    #: Who it was found against (``reference``, a mutant, a crashpoint.toml): for the
    #: reader; replay plays it against whatever target it is given.
    target: str = "reference"
    mutant: str | None = None

    def __post_init__(self) -> None:
        if self.provider not in PROVIDER_KINDS:
            raise ConfigError(
                f"schedule provider={self.provider!r} is not a provider kind; "
                f"use one of {', '.join(PROVIDER_KINDS)}"
            )
        for name in ("jobs", "workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 16:
                raise ConfigError(f"schedule {name}={value!r} must be an integer from 1 to 16")

    @property
    def size(self) -> tuple[int, int, int]:
        """What shrinking minimises, most important first: faults, jobs, workers."""
        return (len(self.faults), self.jobs, self.workers)

    def describe(self) -> str:
        faults = "; ".join(f.describe() for f in self.faults) or "no faults"
        return f"{self.jobs} job(s), {self.workers} worker(s), {self.provider} provider: {faults}"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "target": self.target,
            "mutant": self.mutant,
            "provider": self.provider,
            "jobs": self.jobs,
            "workers": self.workers,
            "faults": [f.to_json() for f in self.faults],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    def key(self) -> str:
        """The same text for the same schedule: the explorer's memo and report key."""
        return json.dumps(self.to_json(), sort_keys=True)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _check_step(step: FaultStep, where: str) -> None:
    def bad(name: str, expected: str) -> ConfigError:
        return ConfigError(f"{where}.{name}={getattr(step, name)!r} {expected}")

    if step.at not in BOUNDARIES:
        raise bad("at", f"is not a boundary; use one of {', '.join(BOUNDARIES)}")
    if step.action not in ACTIONS:
        raise bad("action", f"is unknown; use one of {', '.join(ACTIONS)}")
    for name in ("hit", "times"):
        value = getattr(step, name)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_COUNT:
            raise bad(name, f"must be an integer from 1 to {MAX_COUNT}")
    for name in ("duration_s", "delay_s", "after_s"):
        value = getattr(step, name)
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 60:
            raise bad(name, "must be a number of seconds from 0 to 60")
    if step.signal not in SIGNALS:
        raise bad("signal", f"is not a kill signal; use one of {', '.join(SIGNALS)}")
    if step.fault not in PROVIDER_FAULTS:
        raise bad("fault", f"is not a provider fault; use one of {', '.join(PROVIDER_FAULTS)}")
    if step.toxic not in TOXICS:
        raise bad("toxic", f"is not a toxic; use one of {', '.join(TOXICS)}")
    if not isinstance(step.restart, bool):
        raise bad("restart", "must be true or false")
    if not isinstance(step.worker, str) or not step.worker:
        raise bad("worker", f"must be {HITTER!r} or a worker name such as 'w1'")
    if not isinstance(step.status, int) or not 500 <= step.status <= 599:
        raise bad("status", "must be a 5xx status")
    attrs = step.attributes
    if not isinstance(attrs, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in attrs.items()
    ):
        raise bad("attributes", "must map toxic attribute names to integers")
    if step.action == "restore" and step.at in PROVIDER_EVENTS:
        raise bad("at", "cannot carry a restore: a provider holds a request there")
    if step.action == "duplicate" and step.at in ("start", "settled", "time"):
        raise bad("at", "cannot carry a duplicate delivery: no job is in flight there")


# -- reading ----------------------------------------------------------------------------

_STEP_NAMES = frozenset(f.name for f in fields(FaultStep))
_SCHEDULE_KEYS = frozenset({"schema", "target", "mutant", "provider", "jobs", "workers", "faults"})


def from_json(doc: object, *, source: str = "schedule") -> Schedule:
    """A schedule from its JSON document; ConfigError naming ``source`` and the key."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: a schedule is a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ConfigError(
            f"{source}: schema={doc.get('schema')!r} is not {SCHEMA!r}; this is not a "
            "crashpoint schedule, or one from another version"
        )
    unknown = sorted(set(doc) - _SCHEDULE_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r}; keys are {sorted(_SCHEDULE_KEYS)}"
        )
    faults = doc.get("faults", [])
    if not isinstance(faults, list):
        raise ConfigError(f"{source}: faults must be a list of faults")
    steps = tuple(_step_from_json(f, f"{source}: faults[{i}]") for i, f in enumerate(faults))
    mutant = doc.get("mutant")
    target = doc.get("target", "reference")
    if mutant is not None and not isinstance(mutant, str):
        raise ConfigError(f"{source}: mutant={mutant!r} must be a mutant name or null")
    if not isinstance(target, str):
        raise ConfigError(f"{source}: target={target!r} must be a string")
    try:
        return Schedule(
            provider=doc.get("provider", ""),
            faults=steps,
            jobs=doc.get("jobs", 1),
            workers=doc.get("workers", 1),
            target=target,
            mutant=mutant,
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _step_from_json(doc: object, where: str) -> FaultStep:
    if not isinstance(doc, dict):
        raise ConfigError(f"{where} must be an object with at, hit and action")
    unknown = sorted(set(doc) - _STEP_NAMES)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; keys are {sorted(_STEP_NAMES)}")
    for name in ("at", "action"):
        if name not in doc:
            raise ConfigError(f"{where}: {name} is missing")
    # Built through __init__ for the defaults, with the location in any error.
    try:
        step = FaultStep(**doc)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("fault.", f"{where}.", 1)) from None
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return step


def loads(text: str, *, source: str = "schedule") -> Schedule:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source}: not JSON ({exc})") from None
    return from_json(doc, source=source)


def load(path: Path) -> Schedule:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the schedule ({exc.strerror})") from None
    return loads(text, source=str(path))


def save(schedule: Schedule, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schedule.dumps())
    return path


def is_schedule_file(path: Path) -> bool:
    """Whether ``path`` holds a schedule (and not a results.json), by its schema."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == SCHEMA
