"""The transactional outbox: the relay, a second process kind, killed between the
provider's answer and the outbox row's ``sent``."""

from __future__ import annotations

from harness.drivers.review import NONE
from harness.trial import Trial

#: What the reference worker needs to write outbox rows instead of calling out.
OUTBOX_MODE = {"CRASHPOINT_OUTBOX": "1"}


def relay_crash_after_send(trial: Trial) -> frozenset[str]:
    """The worker writes its jobs' messages to the outbox; the relay sends the first,
    holds with the provider's answer in hand and the row still pending, and is killed
    there; a fresh relay sends what is pending. The provider holds the effect, so the
    resend must carry the same key (the outbox id) or it is a second message."""
    job = trial.enqueue_batch()
    gate = trial.hold(trial.cell.point, job=job)
    trial.start_worker(extra_env=OUTBOX_MODE)
    relay = trial.start_worker(role="relay")
    hit = trial.wait_hit(gate, what=f"relay failpoint {trial.cell.point} for {job}")
    trial.crash(relay, trial.cell.signal or "SIGKILL", hit=hit)
    trial.start_worker(role="relay")
    return NONE
