"""The worker's ``status`` command: one JSON line per job, read as a :class:`JobStatus`,
and as the oracle reads a job's state (:func:`job_final`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, cast, get_args

from harness.oracle import JobFinal
from harness.targets.config_reader import clip, is_int, shown

JobState = Literal["done", "needs_review", "dead_lettered", "pending"]
JOB_STATES: tuple[str, ...] = get_args(JobState)
STATUS_KEYS = ("state", "external_ref", "attempts", "last_error", "idempotency_key")


@dataclass(frozen=True)
class JobStatus:
    """One job's state as the worker's ``status`` command reports it."""

    state: JobState
    external_ref: str | None = None
    attempts: int | None = None
    last_error: str | None = None
    #: The key the worker recorded for the job (shown to a reviewer beside the
    #: provider's arrivals); None: it prints none.
    idempotency_key: str | None = None

    @property
    def final(self) -> bool:
        return self.state != "pending"


def parse_status_line(text: str) -> JobStatus:
    """The status command's output as a :class:`JobStatus`; :class:`ValueError` saying
    what is wrong with it otherwise (the caller knows which command printed it)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(
            f"printed {len(lines)} lines, not one JSON line (logs belong on stderr)"
            if lines
            else "printed nothing, not one JSON line"
        )
    try:
        doc = json.loads(lines[0])
    except ValueError:
        raise ValueError(f"printed {shown(clip(lines[0]))}, which is not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError(f"printed {shown(clip(lines[0]))}, not a JSON object")
    unknown = sorted(set(doc) - set(STATUS_KEYS))
    if unknown:
        raise ValueError(
            f"printed unknown key {shown(unknown[0])}; the keys are {', '.join(STATUS_KEYS)}"
        )
    state = doc.get("state")
    if state not in JOB_STATES:
        raise ValueError(f"printed state {shown(state)}; it must be one of {', '.join(JOB_STATES)}")
    attempts = doc.get("attempts")
    if attempts is not None and (not is_int(attempts) or attempts < 0):
        raise ValueError(f"printed attempts {shown(attempts)}; it must be a whole number >= 0")
    for key in ("external_ref", "last_error", "idempotency_key"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise ValueError(f"printed {key} {shown(doc[key])}; it must be a string")
    return JobStatus(
        state=cast(JobState, state),
        external_ref=doc.get("external_ref"),
        attempts=attempts,
        last_error=doc.get("last_error"),
        idempotency_key=doc.get("idempotency_key"),
    )


#: How each reported state reads as a job's end state (delivery, execution, side effect).
_STATES = {
    "done": ("acknowledged", "succeeded", "confirmed"),
    "needs_review": ("needs_review", "unknown", "ambiguous"),
    "dead_lettered": ("dead_lettered", "failed", "not_confirmed"),
    "pending": ("pending", "pending", "unknown"),
}


def job_final(job_id: str, status: JobStatus) -> JobFinal:
    """A status line as the oracle reads a job's state."""
    delivery, execution, effect = _STATES[status.state]
    return JobFinal(
        job_id=job_id,
        delivery_state=delivery,
        execution_state=execution,
        side_effect_state=effect,
        needs_review=status.state == "needs_review",
        attempts=status.attempts,
        external_ref=status.external_ref,
        last_error=status.last_error,
        idempotency_key=status.idempotency_key,
    )
