"""``crashpoint check-config`` judges what one start of the worker showed: every finding
and its fix, without starting anything."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.commands.check_config import report_lines, static_lines
from harness.commands.check_findings import judge
from harness.commands.check_lines import FAIL, OK, SKIP, WARN, Line
from harness.commands.check_watch import JOB, Seen
from harness.targets.config import CommandConfig, JobStatus, ProviderDecl


def config(tmp_path: Path, **kw: Any) -> CommandConfig:
    base = CommandConfig(
        path=tmp_path / "crashpoint.toml",
        name="w",
        command=("python3", "worker.py"),
        enqueue=("sh", "{job_id}"),
        workers=1,
        lease_ttl_s=1.0,
        ledger_dsn=None,
        providers=(ProviderDecl("billing", "idempotent"),),
    )
    return replace(base, **kw)


class Arrival:
    """The fields of ``fake_providers.models.Arrival`` that check-config reads."""

    def __init__(self, **kw: Any) -> None:
        self.kind = "write"
        self.method, self.path, self.status = "POST", "/v1/effects", 201
        self.job_id, self.idempotency_key, self.client_marker = JOB, f"effect-{JOB}", None
        self.__dict__.update(kw)


class Effect:
    def __init__(self, job_id: str = JOB, provider: str = "billing") -> None:
        self.job_id, self.provider = job_id, provider


def good(cfg: CommandConfig) -> Seen:
    return Seen(
        config=cfg,
        waited_s=1.0,
        arrivals={"billing": [Arrival()]},
        effects={"billing": [Effect()]},
        hits=[(p, JOB) for p in ("after_claim", "before_external_call", "after_external_call")],
    )


def marks(lines: list[Line]) -> list[str]:
    return [line.mark for line in lines]


def test_a_correct_worker_gets_check_marks(tmp_path: Path) -> None:
    lines = judge(good(config(tmp_path)))
    assert all(line.mark in (OK, SKIP) for line in lines), lines
    assert any("CRASHPOINT_PROVIDER_BILLING_URL" in line.text for line in lines)
    assert any("exactly one effect" in line.text for line in lines)
    skipped = [line for line in lines if line.mark == SKIP]
    assert len(skipped) == 1
    assert "no status command" in skipped[0].text


def test_a_worker_that_never_read_its_url(tmp_path: Path) -> None:
    seen = replace(good(config(tmp_path)), arrivals={"billing": []}, effects={}, hits=[])
    lines = judge(seen)
    failed = {line.text.split(":")[0]: line.fix for line in lines if line.mark == FAIL}
    assert any("CRASHPOINT_PROVIDER_BILLING_URL" in fix for fix in failed.values())
    assert any("never used CRASHPOINT_FAILPOINTS" in line.text for line in lines)
    assert any(line.text.startswith("no effect") for line in lines if line.mark == FAIL)


def test_a_write_without_a_key(tmp_path: Path) -> None:
    write = Arrival(idempotency_key=None, status=400)
    seen = replace(good(config(tmp_path)), arrivals={"billing": [write]}, effects={})
    line = next(x for x in judge(seen) if "Idempotency-Key" in x.text)
    assert line.mark == FAIL
    assert "derived from the job id" in line.fix


def test_a_plain_provider_wants_a_marker(tmp_path: Path) -> None:
    cfg = config(tmp_path, providers=(ProviderDecl("sms", "plain"),))
    seen = replace(
        good(cfg),
        arrivals={"sms": [Arrival(idempotency_key=None, path="/v1/sends")]},
        effects={"sms": [Effect(provider="sms")]},
    )
    line = next(x for x in judge(seen) if "client_marker" in x.text)
    assert line.mark == FAIL


def test_failpoints_for_the_wrong_job_and_missing_points(tmp_path: Path) -> None:
    seen = replace(good(config(tmp_path)), hits=[("before_external_call", "job-1")])
    line = next(x for x in judge(seen) if "failpoint" in x.text)
    assert line.mark == FAIL
    assert "never j-0001" in line.text
    seen = replace(good(config(tmp_path)), hits=[("before_external_call", JOB)])
    line = next(x for x in judge(seen) if "failpoint" in x.text)
    assert line.mark == WARN
    assert "after_external_call" in line.text


def test_two_effects_for_one_job(tmp_path: Path) -> None:
    seen = replace(good(config(tmp_path)), effects={"billing": [Effect(), Effect()]})
    line = next(x for x in judge(seen) if "effects for" in x.text)
    assert line.mark == FAIL
    assert "2 effects" in line.text


def test_one_effect_at_each_provider_is_one_job_done(tmp_path: Path) -> None:
    # A job owes one effect at each provider it calls (a ticket, then a message).
    seen = replace(
        good(config(tmp_path)),
        effects={"billing": [Effect()], "mailer": [Effect(provider="mailer")]},
    )
    line = next(x for x in judge(seen) if "effect for" in x.text)
    assert line.mark == OK
    assert "at each of billing, mailer" in line.text


@pytest.mark.parametrize(
    ("status", "mark"),
    [
        (JobStatus("done", attempts=1), OK),
        (JobStatus("pending"), FAIL),
        (JobStatus("needs_review", last_error="409"), FAIL),
        (None, FAIL),
    ],
)
def test_the_status_command_says_how_the_job_ended(
    status: JobStatus | None, mark: str, tmp_path: Path
) -> None:
    cfg = config(tmp_path, status=("python3", "status.py", "{job_id}"))
    seen = replace(good(cfg), status=status)
    line = next(x for x in judge(seen) if x.text.startswith("status"))
    assert line.mark == mark, line


def test_a_worker_that_died_shows_its_last_words(tmp_path: Path) -> None:
    seen = replace(good(config(tmp_path)), worker_exit=1, worker_log="KeyError: 'URL'")
    line = next(x for x in judge(seen) if "exited" in x.text)
    assert line.mark == FAIL
    assert "KeyError" in line.text


def test_an_enqueue_that_failed_is_the_only_finding(tmp_path: Path) -> None:
    seen = replace(good(config(tmp_path)), enqueue_error="enqueue exited 1; fix it")
    assert marks(judge(seen)) == [FAIL]


def test_placeholders_and_missing_programs_are_found_before_anything_starts(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, enqueue=("<enqueue program>", "{job_id}"), command=("./worker",))
    lines = static_lines(cfg)
    assert marks(lines) == [FAIL, FAIL]
    assert "./worker" in lines[0].text
    assert "go build" in lines[0].fix
    assert "placeholder <enqueue program>" in lines[1].text
    assert marks(static_lines(config(tmp_path))) == [OK]


def test_the_exit_code_is_2_on_a_cross_and_0_on_warnings(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    assert report_lines(console, [Line(OK, "fine"), Line(WARN, "hmm", "do x")], cfg) == 0
    assert "ready: crashpoint run -c" in out.getvalue()
    assert report_lines(console, [Line(FAIL, "broken", "fix y")], cfg) == 2
    assert "fix: fix y" in out.getvalue()


def test_the_upgraded_and_cancel_commands_are_named_and_their_programs_looked_for(
    tmp_path: Path,
) -> None:
    cfg = config(
        tmp_path,
        upgraded_command=("python3", "worker.py", "--release", "2"),
        cancel=("python3", "cancel.py", "{job_id}"),
    )
    lines = static_lines(cfg)
    assert marks(lines) == [OK, OK]
    assert "target.upgraded_command `python3 worker.py --release 2`" in lines[1].text
    assert "(upgrade_during_recovery runs)" in lines[1].text
    assert "target.cancel `python3 cancel.py {job_id}` (cancel_in_flight runs)" in lines[1].text
    missing = static_lines(replace(cfg, cancel=("no-such-canceller", "{job_id}")))
    assert marks(missing) == [FAIL]
    assert "target.cancel: no program 'no-such-canceller'" in missing[0].text


def test_preloading_says_whether_the_workers_will_be_forked(tmp_path: Path) -> None:
    forked = static_lines(config(tmp_path, preload=("json",)))
    assert (forked[-1].mark, forked[-1].text) == (
        OK,
        "target.preload: json imported once per run; each worker is forked from it",
    )
    for command, why in [
        (("python3", "-u", "worker.py"), "interpreter option '-u'"),
        (("python3", "-c", "print(1)"), "interpreter option '-c'"),
    ]:
        cold = static_lines(config(tmp_path, preload=("json",), command=command))[-1]
        assert cold.mark == WARN
        assert "but every worker starts cold" in cold.text
        assert why in cold.text
