"""Worker containment without starting anything: cgroup v2 files read back, the shim's
argv, the SIGTERM grace and its escalation, and what results and reports say of them."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import record_escalation
from harness.backends.cgroup import (
    CGROUP2,
    JOIN_FAILED,
    PROCESS_GROUP,
    enter_argv,
    open_root,
    own_cgroup,
    parse_events,
    runnable,
    v2_mount,
    wanted,
)
from harness.contract.errors import ConfigError
from harness.history import Event, History
from harness.plan import Cell
from harness.trial import Trial, TrialConfig
from harness.trial_run import containment_of
from harness.watchdog import _kill_cgroup, _Registry
from reports import results_from_dict, write_html
from scenarios.table import SCENARIOS

HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_the_v2_hierarchy_is_found_among_v1_mounts() -> None:
    assert v2_mount(HYBRID_MOUNTS) == Path("/sys/fs/cgroup/unified")
    assert v2_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == Path("/sys/fs/cgroup")
    assert v2_mount("cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n") is None


def test_own_cgroup_is_the_v2_line() -> None:
    text = "9:name=systemd:/\n4:memory:/process_api/55d4\n0::/user.slice/session-1.scope\n"
    assert own_cgroup(text) == "/user.slice/session-1.scope"
    assert own_cgroup("0::/\n") == "/"
    assert own_cgroup("4:memory:/x\n") is None


def test_events_are_read_as_numbers() -> None:
    assert parse_events("populated 1\nfrozen 0\n") == {"populated": 1, "frozen": 0}
    assert parse_events("") == {}


def test_the_switch_names_each_choice_and_refuses_others() -> None:
    assert wanted(None) == "auto"
    assert wanted("") == "auto"
    assert wanted(" process_group ") == PROCESS_GROUP
    assert wanted("cgroup2") == CGROUP2
    with pytest.raises(ConfigError, match=r"CRASHPOINT_CONTAINMENT='cgroups'.*auto, cgroup2"):
        wanted("cgroups")


def test_forced_fallback_makes_no_cgroup_and_says_why() -> None:
    assert open_root(PROCESS_GROUP) == (None, "CRASHPOINT_CONTAINMENT=process_group")


def test_the_shim_joins_first_then_execs_the_worker_unchanged() -> None:
    procs = Path("/cg/w1-0/cgroup.procs")
    argv = ["python3", "-c", "print('a b')"]
    run = enter_argv(procs, argv, {"PATH": "/usr/bin"})
    assert run[:2] == ["/bin/sh", "-c"]
    script = run[2]
    # The pid goes in before the exec, and a failed write never runs the worker.
    assert script.index('echo $$ >"$0"') < script.index('exec "$@"')
    assert f"exit {JOIN_FAILED}" in script
    assert "unset PWD" in script, "sh must not add a PWD the caller did not give"
    assert run[3:] == [str(procs), *argv]


def test_the_shim_keeps_the_callers_pwd() -> None:
    run = enter_argv(Path("/cg/cgroup.procs"), ["w"], {"PWD": "/where/harness/ran"})
    assert 'export PWD="$1"; shift' in run[2]
    assert run[3:] == ["/cg/cgroup.procs", "/where/harness/ran", "w"]


def test_a_program_is_runnable_as_popen_would_find_it(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "worker"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    env = {"PATH": str(script.parent)}
    assert not runnable(["./bin/worker"], env, tmp_path), "not executable yet"
    script.chmod(0o755)
    assert runnable(["./bin/worker"], env, tmp_path), "a path starts from the cwd"
    assert runnable(["worker"], env, Path("/")), "a bare name is looked up on env's PATH"
    assert not runnable(["worker"], {"PATH": "/nonexistent"}, tmp_path)
    assert not runnable([], env, tmp_path)


def test_term_grace_defaults_to_two_leases_unless_declared() -> None:
    assert TrialConfig(lease_ttl_s=0.6).term_grace == pytest.approx(1.2)
    assert TrialConfig(lease_ttl_s=5.0).term_grace == pytest.approx(10.0)
    assert TrialConfig(lease_ttl_s=5.0, term_grace_s=0.5).term_grace == 0.5


def test_an_escalation_event_says_what_was_not_enough() -> None:
    history = History()
    record_escalation(history, "w1", 42, sent=signal.SIGTERM, grace_s=1.25)
    (event,) = history.events()
    assert event.kind == "escalate"
    assert event.fields["signal"] == "SIGTERM"
    assert event.fields["then"] == "SIGKILL"
    assert event.fields["grace_s"] == 1.25
    assert event.fields["text"] == "w1 outlived SIGTERM for 1.25 s, so SIGKILL was sent"
    record_escalation(None, "w1", 42, sent="SIGTERM", grace_s=1.0)  # no history: no error


class FakeWorker:
    """A worker that dies of the signals in ``dies_of`` and shrugs off the others."""

    name = "w1"
    pid = 4242

    def __init__(self, dies_of: set[int]) -> None:
        self.dies_of = dies_of
        self.got: list[int] = []
        self.waited: list[float] = []
        self.returncode: int | None = None

    def signal(self, sig: int) -> None:
        self.got.append(sig)
        if sig in self.dies_of:
            self.returncode = -sig

    def wait(self, timeout_s: float) -> int | None:
        self.waited.append(timeout_s)
        return self.returncode


class FakeHit:
    resumed = False

    def resume(self) -> None:
        self.resumed = True


def _trial(tmp_path: Path, **config: Any) -> Trial:
    row = next(s for s in SCENARIOS if "SIGTERM" in s.signals)
    cell = Cell(row, row.points[0], "idempotent", "SIGTERM")

    def no_target(path: Path) -> Any:
        raise AssertionError("crash needs no target")

    return Trial(
        cell,
        seed=1,
        config=TrialConfig(workdir=tmp_path, **config),
        make_backend=lambda history: None,
        make_target=no_target,
    )


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    trial = _trial(tmp_path, lease_ttl_s=0.5, term_grace_s=0.75)
    worker, hit = FakeWorker(dies_of={signal.SIGKILL}), FakeHit()
    assert trial.crash(worker, "SIGTERM", hit=hit) is False
    assert worker.got == [signal.SIGTERM, signal.SIGKILL]
    assert hit.resumed, "a worker handling SIGTERM is let go from its boundary to stop"
    # The grace counts from the signal (the fake's waits take no time): what is left of
    # it after the first look is waited, not the grace again.
    assert 0.7 < worker.waited[1] <= 0.75
    (escalation,) = trial.history.of_kind("escalate")
    assert escalation.fields["grace_s"] == 0.75
    assert escalation.fields["worker"] == "w1"


def test_a_worker_that_dies_of_sigterm_is_not_escalated(tmp_path: Path) -> None:
    trial = _trial(tmp_path)
    worker = FakeWorker(dies_of={signal.SIGTERM, signal.SIGKILL})
    assert trial.crash(worker, "SIGTERM", hit=FakeHit()) is True
    assert worker.got == [signal.SIGTERM]
    assert trial.history.of_kind("escalate") == []


def test_sigkill_is_never_escalated(tmp_path: Path) -> None:
    trial = _trial(tmp_path)
    worker = FakeWorker(dies_of={signal.SIGKILL})
    assert trial.crash(worker, "SIGKILL") is True
    assert worker.got == [signal.SIGKILL]
    assert trial.history.of_kind("escalate") == []


def _start(containment: str | None, worker: str = "w1") -> Event:
    fields: dict[str, Any] = {"worker": worker}
    if containment is not None:
        fields["containment"] = containment
    return Event(t=0.0, source=f"worker:{worker}", kind="worker_start", fields=fields)


def test_the_trial_reports_the_containment_its_workers_had() -> None:
    assert containment_of([_start("cgroup2"), _start("cgroup2", "w2")]) == "cgroup2"
    assert containment_of([_start("cgroup2"), _start("process_group", "w2")]) == (
        "cgroup2,process_group"
    )
    assert containment_of([_start(None)]) is None, "an older backend recorded nothing"
    assert containment_of([]) is None


def test_the_watchdog_registers_and_forgets_cgroups() -> None:
    registry = _Registry("run1")
    registry.apply({"op": "cgroup", "path": "/cg/a"})
    registry.apply({"op": "cgroup", "path": "/cg/b"})
    registry.apply({"op": "forget_cgroup", "path": "/cg/a"})
    assert registry.cgroups == {"/cg/b"}


def test_the_watchdog_never_removes_a_directory_that_is_not_a_cgroup(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    _kill_cgroup(tmp_path)
    assert (tmp_path / "sub").is_dir()


def test_the_report_model_reads_containment_and_escalations(tmp_path: Path) -> None:
    from tests.unit.test_reports_model import raw

    data = raw()
    trial = data["trials"][0]
    trial["containment"] = "cgroup2"
    trial["events"].append(
        {
            "t": 1.0,
            "source": "supervisor",
            "kind": "escalate",
            "job": None,
            "attempt": None,
            "fields": {"worker": "w1", "text": "w1 outlived SIGTERM for 1.2 s, so SIGKILL"},
        }
    )
    results = results_from_dict(data)
    first = results.trials[0]
    assert first.containment == "cgroup2"
    assert first.escalations == ("w1 outlived SIGTERM for 1.2 s, so SIGKILL",)
    assert results_from_dict(raw()).trials[0].containment is None
    # The trial's page says both; a trial recorded before containment was kept says neither.
    write_html(results, tmp_path)
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (tmp_path / "trials").glob("*.html")}
    page = next(text for text in pages.values() if "w1 outlived SIGTERM" in text)
    assert "<dt>containment</dt><dd>cgroup2</dd>" in page
    assert "SIGTERM was not enough" in page
    assert sum("<dt>containment</dt>" in text for text in pages.values()) == 1


def test_doctor_says_when_workers_only_get_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.doctor import check_containment

    monkeypatch.setenv("CRASHPOINT_CONTAINMENT", PROCESS_GROUP)
    check = check_containment()
    assert not check.ok
    assert not check.required, "the fallback still runs every trial"
    assert "CRASHPOINT_CONTAINMENT=process_group" in check.detail
    assert "cgroup v2" in check.fix
