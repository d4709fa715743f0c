"""One trial: fresh state, faults applied, quiescence, oracle check.

:class:`Trial` owns everything one cell needs (a state directory, a fake provider, the
target's ledger, a failpoint rendezvous, the backend's workers) and the verbs scenario
drivers are written in (start a worker, hold it at a boundary, signal it, wait for
quiescence). Everything that happens goes into the trial's one :class:`History`, which
the oracle judges and the report draws (:func:`harness.trial_run.play`). Trials are
opened by :meth:`harness.infra.RunInfra.open_trial`.

One concern per module: :mod:`.state` (what a trial holds, its lifecycle),
:mod:`.jobs`, :mod:`.workers`, :mod:`.faults` (holds and provider faults),
:mod:`.quiescence`, :mod:`.providers` (its provider processes), :mod:`.config` (the
run's trial settings).
"""

from __future__ import annotations

from collections.abc import Callable

from harness.trial.config import TERM_GRACE_LEASES, TrialConfig
from harness.trial.faults import REACH_S, FaultVerbs
from harness.trial.jobs import JobVerbs
from harness.trial.providers import release_providers, start_providers
from harness.trial.quiescence import QUIESCENCE_POLL_S, Quiescence
from harness.trial.state import PROVIDER_NAME, sensitive_stand_in
from harness.trial.workers import LOCK_THAW_S, STOP_TRIES, WorkerVerbs

__all__ = [
    "LOCK_THAW_S",
    "PROVIDER_NAME",
    "QUIESCENCE_POLL_S",
    "REACH_S",
    "STOP_TRIES",
    "TERM_GRACE_LEASES",
    "Driver",
    "Trial",
    "TrialConfig",
    "release_providers",
    "sensitive_stand_in",
    "start_providers",
]


class Trial(JobVerbs, WorkerVerbs, FaultVerbs, Quiescence):
    """The state and verbs of one running trial (opened by
    :meth:`harness.infra.RunInfra.open_trial`)."""


#: A scenario's driver: applies its faults to a set-up trial and returns the jobs whose
#: only safe end is needs_review (``harness.drivers`` keeps one per row of the table).
Driver = Callable[[Trial], frozenset[str]]
