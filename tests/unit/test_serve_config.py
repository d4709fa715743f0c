"""``[target.serve]`` in crashpoint.toml, and the job-end events against what reopens a
job (targets/progress.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_target_config import GOOD, edited, error_line, write

from harness.contract.records import Arrival
from harness.targets.config import load_config
from harness.targets.progress import Activity, JobEnds

SERVED = '[target.serve]\nenqueue = ["python3", "serve.py"]\nstatus = ["python3", "serve.py"]\n'


def test_served_commands_are_read_by_op(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, GOOD.replace("[target.ledger]", SERVED + "[target.ledger]"))
    )
    assert config.serve == {"enqueue": ("python3", "serve.py"), "status": ("python3", "serve.py")}
    assert config.has_status
    assert load_config(write(tmp_path, GOOD)).serve == {}
    # Once per trial unless the table says once per run.
    assert config.serve_scope == "trial"
    per_run = SERVED.replace("[target.serve]\n", '[target.serve]\nscope = "run"\n')
    text = GOOD.replace("[target.ledger]", per_run + "[target.ledger]")
    assert load_config(write(tmp_path, text)).serve_scope == "run"


def test_a_served_enqueue_and_status_stand_in_for_the_one_shot_keys(tmp_path: Path) -> None:
    text = edited('enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]\n', "")
    text = text.replace('status = ["node", "status.js", "{job_id}"]\n', "")
    config = load_config(
        write(tmp_path, text.replace("[target.ledger]", SERVED + "[target.ledger]"))
    )
    assert (config.enqueue, config.status, config.has_status) == ((), None, True)
    # Without a served enqueue, the one-shot one is still required.
    no_enqueue = edited('enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]\n', "")
    assert "target.enqueue is missing" in error_line(write(tmp_path, no_enqueue))


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('[target.serve]\nenqeue = ["x"]\n', "enqeue"),
        ('[target.serve]\nstatus = "python3 serve.py"\n', "must be a non-empty list of strings"),
        ("[target.serve]\nstatus = []\n", "must be a non-empty list of strings"),
        ('[target.serve]\nstatus = ["python3", "s.py", "{job_id}"]\n', "started once per trial"),
        ('[target.serve]\nscope = "job"\nstatus = ["x"]\n', 'must be "trial" or "run"'),
        ('[target.serve]\nscope = "run"\n', "nothing is served"),
    ],
)
def test_each_serve_mistake_is_one_line(tmp_path: Path, table: str, says: str) -> None:
    message = error_line(
        write(tmp_path, GOOD.replace("[target.ledger]", table + "[target.ledger]"))
    )
    assert "target.serve" in message
    assert says in message


class Log:
    """A provider's arrivals as the harness pages them."""

    def __init__(self) -> None:
        self.rows: list[Arrival] = []

    def arrive(self, job: str, t: float) -> None:
        row = dict.fromkeys(Arrival.__dataclass_fields__)
        row |= {"id": len(self.rows) + 1, "t_mono": t, "job_id": job, "committed": False}
        row |= {"replayed": False}
        self.rows.append(Arrival(**row))  # type: ignore[arg-type]

    def arrivals(self, *, after: int = 0) -> list[Arrival]:
        return [a for a in self.rows if a.id > after]

    def effects(self) -> list[object]:
        return []

    def releases(self) -> list[dict[str, object]]:
        return []


def test_a_job_ends_when_announced_after_all_that_reopens_it() -> None:
    log = Log()
    activity = Activity()
    activity.attach([log])  # type: ignore[list-item]
    ends: list[tuple[str, float]] = []
    tracker = JobEnds(activity)
    assert tracker.ended(["j-1"]) == set()  # no source: nothing is known ended
    tracker.hear(lambda: ends)
    assert not tracker.heard_any()
    log.arrive("j-1", 10.0)
    activity.arrived()
    ends.append(("j-1", 11.0))
    assert tracker.ended(["j-1", "j-2"]) == {"j-1"}
    assert tracker.heard_any()
    # A later arrival (a retry, a second worker) reopens it until it is announced again,
    # though the harness reads that arrival only now: the provider's clock places it.
    log.arrive("j-1", 12.0)
    activity.arrived()
    assert tracker.ended(["j-1"]) == set()
    ends.append(("j-1", 13.0))
    assert tracker.ended(["j-1"]) == {"j-1"}
    # So do an enqueue again and a restore, both stamped now, after every end above.
    tracker.enqueued("j-1")
    assert tracker.ended(["j-1"]) == set()
    ends.append(("j-1", time.monotonic()))
    assert tracker.ended(["j-1"]) == {"j-1"}
    tracker.restored()
    assert tracker.ended(["j-1"]) == set()


def test_announced_jobs_are_not_polled_and_a_settled_answer_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.targets import command

    # No waiting in a unit test: quiet at once, and the fallback interval never passes.
    monkeypatch.setattr(command, "STATUS_QUIET_S", 0.0)
    monkeypatch.setattr(command, "JOB_END_POLL_S", 3600.0)
    status = tmp_path / "status.py"
    asked = tmp_path / "asked"
    status.write_text(
        "import sys\n"
        f"open({str(asked)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        'print(\'{"state": "done"}\')\n'
    )
    text = GOOD.replace(
        '["node", "status.js", "{job_id}"]', f'["python3", "{status}", "{{job_id}}"]'
    )
    adapter = command.CommandAdapter(load_config(write(tmp_path, text)), trial_dir=tmp_path / "t")
    adapter.setup()
    adapter.hear_job_ends(lambda: [("j-1", time.monotonic())])
    assert adapter.quiescent(["j-1", "j-2"])  # j-1 announced; j-2 asked, though rarely
    # Asked again after the settle pause: read afresh at once, not after the interval.
    assert adapter.quiescent(["j-1", "j-2"])
    assert asked.read_text().split() == ["j-2", "j-2"]
