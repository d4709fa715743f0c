"""What a delivery cell exercised, in the same words for every target: a duplicate the
queue refused (a protection, not a gap), one no worker took up (not exercised), one whose
take-up a worker without failpoints cannot show."""

from __future__ import annotations

#: How an enqueue command says its queue refused a job it already holds.
REFUSAL = '{"queued": false}'


def refused(job: str) -> str:
    return (
        f"held: the queue refused the duplicate delivery of {job} (its enqueue command "
        f"printed {REFUSAL}), so there was no second delivery to take up"
    )


def not_taken_up(job: str, within_s: float, *, what: str = "second delivery") -> str:
    return (
        f"not exercised: no worker took up the {what} of {job} (no failpoint for it after "
        f"its enqueue, no second write) within {within_s:.1f} s: the queue seems to have "
        f"dropped it (an enqueue that refuses a job it holds prints {REFUSAL}; a worker "
        "that polls less often declares its [target] poll_s)"
    )


def unseen(job: str) -> str:
    return (
        f"{job} was delivered again; the worker calls no failpoints and "
        "no second write reached the provider, so whether a worker took it up is not known"
    )
