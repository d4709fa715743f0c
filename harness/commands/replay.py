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
        ran = _run_replay(t["replay"], out / t["id"])
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
