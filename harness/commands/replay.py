"""``crashpoint replay``: run again the trials of a stored ``results.json`` (by default
those that did not hold), each from its own replay command, and say whether each
verdict came back."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.commands.console import console
from harness.commands.matrix import worst
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode, Verdict


def replay_file(path: Path, *, trial_ids: Sequence[str], out: Path) -> int:
    try:
        doc = json.loads(path.read_text())
        trials = {t["id"]: t for t in doc["trials"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a crashpoint results.json ({exc})") from None
    unknown = [t for t in trial_ids if t not in trials]
    if unknown:
        raise ConfigError(f"{path}: no trial {unknown[0]!r}; trial ids are in its trials[].id")
    chosen = [trials[t] for t in trial_ids] or [
        t for t in trials.values() if t["verdict"] in (Verdict.VIOLATED, Verdict.INCONCLUSIVE)
    ]
    if not chosen:
        console.print(f"{path}: every trial held or was skipped; nothing to replay")
        return ExitCode.HELD
    code: int = ExitCode.HELD
    for t in chosen:
        console.print(f"replay {t['id']} (was {t['verdict']})")
        line = t["replay"]
        if isinstance(t.get("schedule"), dict):
            # A trial of an exploration: its own schedule, not the whole search again.
            from harness.schedule import from_json, save

            played = from_json(t["schedule"], source=f"{path}: trial {t['id']}")
            line = shlex.join(["crashpoint", "replay", str(save(played, out / f"{t['id']}.json"))])
        ran = _run_replay(line, out / t["id"])
        record = out / t["id"] / "results.json"
        if not record.exists():
            console.print(f"  could not replay (exit {ran}); see the message above")
            code = worst(code, ran or ExitCode.INCONCLUSIVE)
            continue
        again = json.loads(record.read_text())["trials"][0]
        same = again["verdict"] == t["verdict"]
        console.print(
            f"  {'reproduced' if same else 'NOT reproduced'}: {again['verdict']} "
            f"(was {t['verdict']})"
        )
        code = worst(code, ran)
    return code


def _run_replay(line: str, out: Path) -> int:
    """Run a stored ``crashpoint run ...`` line as its own process, as a user would: each
    replay starts from a fresh interpreter, so nothing an earlier trial left behind in
    this one (an abort after Ctrl-C, a cached server) can change the verdict."""
    args = shlex.split(line)
    if args[:1] != ["crashpoint"]:
        raise ConfigError(f"replay {line!r} is not a crashpoint command line")
    argv = [sys.executable, "-m", "harness", *args[1:], "--out", str(out)]
    # Its own process group, so a Ctrl-C reaches it once, from here: a second SIGINT
    # from the terminal would cut short the teardown of its workers.
    proc = subprocess.Popen(argv, process_group=0)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise


def replay_schedule(
    path: Path,
    *,
    repeat: int,
    out: Path,
    config_path: Path | None,
    target: str,
    mutant: str | None,
    correct: bool = False,
) -> int:
    """Play a saved schedule ``repeat`` times and say how often it violated.

    Against the target the file names (the reference worker and its mutant, or a
    crashpoint.toml) unless -c, --mutant or --correct choose another; each play is one
    real trial.
    """
    import time

    from harness.commands.matrix import trial_config
    from harness.commands.target import resolve_target
    from harness.exploration.trials import ScheduleRunner
    from harness.infra import RunInfra
    from harness.results import exit_code, results_document, summarize
    from harness.schedule import load
    from reports import write_run

    schedule = load(path)
    if config_path is None and mutant is None and not correct:
        # The target it was found against: a reference mutant, or a crashpoint.toml.
        mutant = schedule.mutant
        if schedule.target != "reference" and target == "reference":
            config_path = Path(schedule.target)
    resolved = resolve_target(config_path, target, mutant)
    if resolved.declared is not None and all(k != schedule.provider for _, k in resolved.declared):
        raise ConfigError(
            f"{path}: the schedule needs a {schedule.provider} provider; {config_path} "
            "declares none"
        )
    config = trial_config(resolved.lease_ttl_s, None)
    against = resolved.doc["name"] + (f" with mutant {mutant}" if mutant else "")
    console.print(f"replay {path} x{repeat} against {against}: {schedule.describe()}", markup=False)
    started = time.time()
    with RunInfra.open(
        [], ledger="sqlite", backend="process", pg_dsn=None, command=resolved.command
    ) as infra:
        runner = ScheduleRunner(
            infra,
            config,
            seed=0,
            mutant=mutant,
            declared=resolved.declared,
            replay=shlex.join(["crashpoint", "replay", str(path), *resolved.flags]),
        )
        for i in range(1, repeat + 1):
            outcome = runner(schedule, f"r{i:03d}")
            why = ", ".join(outcome.invariants) or outcome.trial.get("reason") or ""
            console.print(f"  [{i}/{repeat}] {outcome.verdict} {why}", markup=False)
        spec = infra.spec([], seed=0, config=config, command="replay", jobs=1, target={})
        doc = results_document(spec, [], started=started, environment=infra.environment())
    doc["target"] = resolved.doc
    doc["trials"] = runner.trials
    doc["summary"] = summarize(runner.trials)
    violated = doc["summary"][Verdict.VIOLATED]
    doc["replay_of"] = {"schedule": str(path), "repeat": repeat, "violated": violated}
    write_run(doc, out)
    console.print(f"reproduced {violated}/{repeat} (violated); report: {out / 'index.html'}")
    return int(exit_code(doc["summary"], strict=False))
