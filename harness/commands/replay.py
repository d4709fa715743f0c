"""``crashpoint replay``: run again the trials of a stored ``results.json`` (by default
those that did not hold), each from its own replay command, and say whether each
verdict came back."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands.console import console
from harness.commands.matrix import worst
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode, Verdict
from reports.parse import load_results

if TYPE_CHECKING:
    from harness.commands.target import ResolvedTarget
    from harness.schedule import Schedule

#: What a trial's directory name may hold: its id, with nothing that climbs out of --out.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@\[\]-]")


def replay_file(path: Path, *, trial_ids: Sequence[str], out: Path) -> int:
    # The same reader as `crashpoint report`: a record it cannot read is one line, exit 2.
    trials = {t.key: t for t in load_results(path).trials}
    by_id = {t.id: t for t in trials.values()}
    unknown = [t for t in trial_ids if t not in trials and t not in by_id]
    if unknown:
        raise ConfigError(f"{path}: no trial {unknown[0]!r}; trial ids are in its trials[].id")
    chosen = [trials.get(t) or by_id[t] for t in trial_ids] or [
        t for t in trials.values() if t.verdict in (Verdict.VIOLATED, Verdict.INCONCLUSIVE)
    ]
    if not chosen:
        console.print(f"{path}: every trial held or was skipped; nothing to replay")
        return ExitCode.HELD
    commands = [(t, replay_argv(path, t.key, t.replay)) for t in chosen]
    code: int = ExitCode.HELD
    for t, argv in commands:
        schedule = t.extra.get("schedule")
        code = worst(
            code,
            replay_trial(
                path,
                t.key,
                str(t.verdict),
                argv,
                schedule if isinstance(schedule, dict) else None,
                out=out,
            ),
        )
    return code


def replay_trial(
    path: Path,
    key: str,
    verdict: str,
    argv: list[str],
    schedule: dict[str, object] | None,
    *,
    out: Path,
) -> int:
    """Replay one stored trial (``argv``: its replay line after ``crashpoint``) into
    ``out``, say whether its verdict came back; the replay's exit code."""
    console.print(f"replay {key} (was {verdict})", markup=False, highlight=False)
    into = out / _dir_name(key)
    if schedule is not None:
        # A trial of an exploration: its own schedule, not the whole search again.
        from harness.schedule import from_json, save

        played = from_json(schedule, source=f"{path}: trial {key}")
        # Once, as the stored trial ran: its verdict is what is compared.
        saved = save(played, out / f"{_dir_name(key)}.json")
        argv = ["replay", str(saved), "--repeat", "1"]
    ran = _run_replay(argv, into)
    record = into / "results.json"
    if not record.exists():
        console.print(f"  could not replay (exit {ran}); see the message above")
        return ran or ExitCode.INCONCLUSIVE
    again = load_results(record).trials[0]
    same = again.verdict == verdict
    console.print(
        f"  {'reproduced' if same else 'NOT reproduced'}: {again.verdict} (was {verdict})"
    )
    return ran


def replay_argv(path: Path, key: str, line: str) -> list[str]:
    """The stored line's arguments after ``crashpoint``; checked before any replay runs."""
    try:
        args = shlex.split(line)
    except ValueError as exc:
        raise ConfigError(
            f"{path}: trial {key!r}: replay {line!r} does not parse ({exc})"
        ) from None
    if args[:1] != ["crashpoint"]:
        raise ConfigError(
            f"{path}: trial {key!r}: replay {line!r} is not a crashpoint command line"
        )
    return args[1:]


def _dir_name(key: str) -> str:
    name = _UNSAFE.sub("_", key)
    return name if name.strip(".") else f"_{name}"


def _run_replay(args: list[str], out: Path) -> int:
    """Run a stored ``crashpoint run ...`` line as its own process, as a user would: each
    replay starts from a fresh interpreter, so nothing an earlier trial left behind in
    this one (an abort after Ctrl-C, a cached server) can change the verdict."""
    argv = [sys.executable, "-m", "harness", *args, "--out", str(out)]
    # Its own process group, so a Ctrl-C reaches it once, from here: a second SIGINT
    # from the terminal would cut short the teardown of its workers.
    proc = subprocess.Popen(argv, process_group=0)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise


def stored_target(stored: str, finding: Path) -> Path:
    """A finding's target path: as explore stores it, relative to the finding's own
    directory; a finding stored before that named it relative to where explore ran."""
    beside = finding.resolve().parent / stored
    return beside if beside.exists() or not Path(stored).exists() else Path(stored)


#: How many times a schedule file is played unless ``--repeat`` says: real timing makes
#: one try a sample (a finding can reproduce 0/1 and then 6/6), so a replay gives a rate.
DEFAULT_REPEAT = 5


def reproduction(tries: int, violated: int, held: int) -> tuple[ExitCode, str]:
    """The exit code and the line a replay of ``tries`` ends with, from its counts.

    1 when the schedule violated at least once: the bug is there, whatever the rate. 0
    only when it never did, said plainly. 3 when no try was decided (every one
    inconclusive or skipped): nothing is known either way.
    """
    undecided = tries - violated - held
    rate = f"reproduced {violated}/{tries}"
    also = f" ({undecided} inconclusive)" if undecided else ""
    if violated:
        percent = round(100 * violated / tries)
        return ExitCode.VIOLATED, f"{rate} ({percent}%): the finding reproduces{also}"
    if not held:
        return (
            ExitCode.INCONCLUSIVE,
            f"{rate}: every try was inconclusive; whether it reproduces is not known",
        )
    return ExitCode.HELD, f"{rate}: the finding did not reproduce in {tries} tries{also}"


def replay_schedule(
    path: Path,
    *,
    repeat: int = DEFAULT_REPEAT,
    out: Path,
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
    correct: bool = False,
) -> int:
    """Play a saved schedule ``repeat`` times and say how often it violated: exit 1 when
    it did at least once, 0 when it never did, 3 when no try was decided
    (:func:`reproduction`).

    Against the target the file names (the reference worker and its mutant, or a
    crashpoint.toml) unless -c, --mutant or --correct choose another; each play is one
    real trial.
    """
    import time

    from harness.exploration.trials import ScheduleRunner
    from harness.infra import RunInfra
    from harness.results import results_document, summarize
    from harness.runner import run_spec
    from harness.schedule import load

    schedule = load(path)
    resolved, mutant = _schedule_target(
        schedule, path, config_path=config_path, target=target, mutant=mutant, correct=correct
    )
    against = resolved.doc["name"] + (f" with mutant {mutant}" if mutant else "")
    console.print(f"replay {path} x{repeat} against {against}: {schedule.describe()}", markup=False)
    started = time.time()
    with RunInfra.open(
        [], ledger="sqlite", backend="process", pg_dsn=None, command=resolved.command
    ) as infra:
        runner = ScheduleRunner(
            infra,
            seed=0,
            mutant=mutant,
            declared=resolved.declared,
            replay=shlex.join(["crashpoint", "replay", str(path), *resolved.flags]),
        )
        for i in range(1, repeat + 1):
            outcome = runner(schedule, f"r{i:03d}")
            why = ", ".join(outcome.invariants) or outcome.trial.get("reason") or ""
            console.print(f"  [{i}/{repeat}] {outcome.verdict} {why}", markup=False)
        spec = run_spec(infra, [], seed=0, command="replay", jobs=1, target={})
        doc = results_document(spec, [], started=started, environment=infra.environment())
    doc["target"] = resolved.doc
    doc["trials"] = runner.trials
    doc["summary"] = summarize(runner.trials)
    return _report_reproduction(doc, path, repeat=repeat, out=out)


def _schedule_target(
    schedule: Schedule,
    path: Path,
    *,
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
    correct: bool,
) -> tuple[ResolvedTarget, str | None]:
    """The target a schedule is played against, and the mutant planted in it."""
    from harness.commands.target import resolve_target

    if config_path is None and mutant is None and not correct:
        # The target it was found against: a reference mutant, or a crashpoint.toml.
        mutant = schedule.mutant
        if schedule.target != "reference" and target is None:
            config_path = stored_target(schedule.target, path)
    resolved = resolve_target(config_path, target, mutant)
    if resolved.declared is not None and all(k != schedule.provider for _, k in resolved.declared):
        raise ConfigError(
            f"{path}: the schedule needs a {schedule.provider} provider; {config_path} "
            "declares none"
        )
    return resolved, mutant


def _report_reproduction(doc: dict[str, Any], path: Path, *, repeat: int, out: Path) -> int:
    """Write the replay's results and say how often the schedule reproduced."""
    from reports import write_run

    violated = doc["summary"][Verdict.VIOLATED]
    held = doc["summary"][Verdict.HELD]
    code, line = reproduction(repeat, violated, held)
    doc["replay_of"] = {
        "schedule": str(path),
        "repeat": repeat,
        "violated": violated,
        "held": held,
        "reproduced": f"{violated}/{repeat}",
    }
    write_run(doc, out)
    console.print(line, markup=False, highlight=False)
    console.print(f"report: {out / 'index.html'}", markup=False, highlight=False)
    return int(code)
