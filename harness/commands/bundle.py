"""``crashpoint bundle``: a finding or a violated trial as one portable file, and the
replay of one (``crashpoint replay BUNDLE``).

A bundle holds what replaying needs and what tells two machines apart: the trial (its
replay line, seed and whole history) or the finding's schedule, the target's record and
its crashpoint.toml (path and text), and the versions where it was made: crashpoint
(whose fake providers answer the worker), Python, the platform, the servers the run
recorded, and the worker (the git commit of the config's directory, the config's hash).
A sha256 of that content is stored beside it; a replay recomputes it and refuses a
bundle whose content no longer matches (exit 2), then says which versions differ here
and replays against the target found at the same path from where it is run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from harness.commands.console import console
from harness.commands.replay import replay_argv, replay_schedule, replay_trial, stored_target
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import VERSION, Verdict
from harness.schedule import is_schedule_file, load
from reports.parse import load_results

SCHEMA = "crashpoint.bundle/1"
#: Versions compared between the bundle and this machine, in the order they are said.
COMPARED = ("crashpoint", "python", "platform", "worker", "config_sha256")


def content_hash(content: Any) -> str:
    """sha256 of the content's canonical JSON (sorted keys, no spaces)."""
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def make_bundle(source: Path, *, trial_id: str | None, out: Path) -> Path:
    """Pack ``source`` (a results.json's trial, or a finding.json) into ``out``."""
    if is_schedule_file(source):
        if trial_id is not None:
            raise ConfigError(f"--trial applies to a results.json, not to the schedule {source}")
        content = _finding(source)
    else:
        content = _trial(source, trial_id)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "content_hash": content_hash(content),
        "content": content,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    what = content["trial"]["id"] if content["kind"] == "trial" else source.name
    console.print(
        f"bundle: {out} ({content['kind']} {what}, {doc['content_hash'][:19]})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return out


def _trial(source: Path, trial_id: str | None) -> dict[str, Any]:
    load_results(source)  # the same checks as `crashpoint report`: a bad file is one line
    raw = json.loads(source.read_text(encoding="utf-8"))
    trials = raw["trials"]
    if trial_id is None:
        chosen = [t for t in trials if t.get("verdict") == Verdict.VIOLATED][:1]
        if not chosen:
            raise ConfigError(f"{source}: no violated trial to bundle; name one with --trial")
    else:
        chosen = [t for t in trials if trial_id in (t.get("id"), t.get("key"))][:1]
        if not chosen:
            raise ConfigError(f"{source}: no trial {trial_id!r}; trial ids are in trials[].id")
    target = raw.get("target") or {}
    config = target.get("config") if isinstance(target.get("config"), str) else None
    return {
        "kind": "trial",
        "trial": chosen[0],
        "seed": raw.get("seed"),
        "target": target,
        "config": _config(config),
        "environment": raw.get("environment") or {},
        "versions": versions_here(config),
    }


def _finding(source: Path) -> dict[str, Any]:
    schedule = json.loads(source.read_text(encoding="utf-8"))
    load(source)  # checked as replay checks it
    stored = schedule.get("target", "reference")
    config = None
    if stored != "reference":
        # Stored relative to the finding's directory; kept relative to here, as -c is.
        config = os.path.relpath(stored_target(str(stored), source))
        schedule["target"] = config
    return {
        "kind": "finding",
        "schedule": schedule,
        "target": {"config": config, "mutant": schedule.get("mutant")},
        "config": _config(config),
        "environment": {},
        "versions": versions_here(config),
    }


def _config(path: str | None) -> dict[str, str] | None:
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the target's config {path}: {exc.strerror}") from None
    return {"path": path, "text": text}


def versions_here(config: str | None) -> dict[str, str | None]:
    """What this machine runs: crashpoint (and so its fake providers), Python, the
    platform, and the worker: the git commit of the config's directory (``+dirty``
    with uncommitted changes there) and the config file's sha256."""
    where = Path(config).parent if config else Path.cwd()
    digest = None
    if config and Path(config).is_file():
        digest = hashlib.sha256(Path(config).read_bytes()).hexdigest()
    return {
        "crashpoint": VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "worker": _git_commit(where) if config else None,
        "config_sha256": digest,
    }


def _git_commit(where: Path) -> str | None:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(where), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    return commit + ("+dirty" if git("status", "--porcelain", "--", ".") else "")


def is_bundle_file(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == SCHEMA


def read_bundle(path: Path) -> dict[str, Any]:
    """The bundle's content, once its hash is checked; a changed one is refused."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    content = doc.get("content")
    stored = doc.get("content_hash")
    if not isinstance(content, dict) or content.get("kind") not in ("trial", "finding"):
        raise ConfigError(f"{path}: not a crashpoint bundle (no trial or finding in content)")
    computed = content_hash(content)
    if stored != computed:
        raise ConfigError(
            f"{path}: its content hash is {computed}, not the {stored} it was made with: "
            "the bundle was changed after it was made; refusing to replay it"
        )
    return content


def differences(content: dict[str, Any]) -> list[str]:
    """One line per version that differs between the bundle and this machine."""
    made = content.get("versions") or {}
    here = versions_here((content.get("config") or {}).get("path"))
    return [
        f"{key}: here {here.get(key) or 'none'}, in the bundle {made.get(key) or 'none'}"
        for key in COMPARED
        if made.get(key) != here.get(key)
    ]


def replay_bundle(path: Path, *, out: Path, repeat: int) -> int:
    """Check ``path``, say what differs here, replay it; the replay's exit code."""
    content = read_bundle(path)
    config = content.get("config")
    if config is not None and not Path(config["path"]).is_file():
        raise ConfigError(
            f"{path}: its target's config {config['path']} is not here; replay it from the "
            "directory it was made in (the checkout's root)"
        )
    console.print(f"bundle {path}: content hash checked", markup=False, highlight=False)
    found = differences(content)
    if not found:
        console.print("  versions: the same as where it was made")
    for line in found:
        console.print(f"  differs here: {line}", markup=False, highlight=False)
    out.mkdir(parents=True, exist_ok=True)
    if content["kind"] == "finding":
        schedule = out / "finding.json"
        schedule.write_text(json.dumps(content["schedule"], indent=1) + "\n", encoding="utf-8")
        return replay_schedule(
            schedule,
            repeat=repeat,
            out=out,
            config_path=Path(config["path"]) if config else None,
            target=None,
            mutant=None if config else content["schedule"].get("mutant"),
        )
    trial = content["trial"]
    key = str(trial["id"])
    schedule_doc = trial.get("schedule")
    return replay_trial(
        path,
        key,
        str(trial["verdict"]),
        replay_argv(path, key, str(trial["replay"])),
        schedule_doc if isinstance(schedule_doc, dict) else None,
        out=out,
    )
