"""A failing target command's one-line error carries the end of its stderr."""

from __future__ import annotations

from harness.targets.command_output import STDERR_TAIL_CHARS, stderr_tail

TRACEBACK = b"""Traceback (most recent call last):
  File "/srv/worker/worker.py", line 446, in enqueue
    db.execute("INSERT INTO jobs (id, body) VALUES (?, ?)", (job_id, body))
sqlite3.IntegrityError: UNIQUE constraint failed: jobs.id
"""


def test_a_traceback_is_told_by_its_last_lines_where_its_message_is() -> None:
    # Its first line alone said `File ".../worker.py", line 446` and nothing of why.
    said = stderr_tail(TRACEBACK)
    assert said.endswith("sqlite3.IntegrityError: UNIQUE constraint failed: jobs.id)")
    assert 'File "/srv/worker/worker.py", line 446, in enqueue' in said
    assert "Traceback" not in said
    assert "\n" not in said


def test_nothing_and_too_much_are_both_said_in_one_short_line() -> None:
    assert stderr_tail(b"\n  \n") == " (nothing on stderr)"
    long = stderr_tail(b"x" * 5000 + b"\nthe end\n")
    assert long.endswith("the end)")
    assert len(long) < STDERR_TAIL_CHARS + 40
