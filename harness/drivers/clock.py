"""Clock skew: the owner's wall clock stepped back or ahead by more than a lease.

The owner is stopped at ``before_external_call`` past its lease (as in
``lease_expiry_slow_worker``), its wall clock is stepped meanwhile, another worker takes
the job over and finishes it, and the owner is let go. A worker that checks its lease at
the ledger (compare-and-set on owner and token, in the ledger's clock) stops there,
whichever way its clock went. One that reckons its lease by its own clock believes,
after a step back, that it still has the lease for the length of the step, and calls
out under a stale token: ``fenced_writes`` sees the call.
"""

from __future__ import annotations

from harness import faketime, faketime_shim
from harness.contract.errors import Inconclusive, InfrastructureError
from harness.drivers.process import take_over_then_thaw
from harness.faketime_reach import loaded_in
from harness.targets.reference import ReferenceAdapter
from harness.trial import Trial

#: The step, in leases: far more than a lease, and more than the whole stop lasts (the
#: takeover and the wait for it), so a clock-trusting owner still sees time left after it.
STEP_LEASES = 20.0
MIN_STEP_S = 10.0


def step_s(trial: Trial) -> float:
    """The size of the cell's step: back for ``worker_behind``, ahead for ``worker_ahead``."""
    size = max(MIN_STEP_S, STEP_LEASES * trial.config.lease_ttl_s)
    return -size if trial.cell.point == "worker_behind" else size


def clock_skew(trial: Trial) -> frozenset[str]:
    """Stop the owner at its call, step its clock, let another finish, SIGCONT."""
    lib = faketime.library()
    if lib is None or faketime.unavailable() is not None:
        # The run skips these cells where the library is missing; reaching here means
        # the machine changed under the run.
        raise InfrastructureError(f"clock_skew needs libfaketime: {faketime.unavailable()}")
    offset_file = trial.dir / "w1.faketime"
    faketime.set_offset(offset_file, 0.0)
    job = trial.enqueue_batch()
    gate = trial.hold("before_external_call", job=job)
    shim = faketime_shim.beside(trial.dir)
    w1 = trial.start_worker(extra_env=faketime.worker_env(offset_file, lib, shim))
    hit = trial.wait_hit(gate, what=f"failpoint before_external_call for {job}")
    _check_reached(hit.peer_pid, lib)
    trial.send(w1, "SIGSTOP")
    trial.stop_clear_of_write_locks(w1)
    hit.resume()
    step = step_s(trial)
    faketime.set_offset(offset_file, step)
    trial.history.append(
        "supervisor",
        "note",
        job=job,
        worker=w1.name,
        clock_offset_s=step,
        text=f"{w1.name}'s wall clock stepped {'back' if step < 0 else 'ahead'} by {abs(step):g} s",
    )
    # A container's log reaches the history only when it exits, and a worker of a
    # command target logs no lease decisions at all, so there the decision cannot be
    # seen as it is made, and the fixed pause after the thaw has to do (as for
    # lease_expiry_slow_worker).
    live_logs = trial.cell.backend == "process" and isinstance(trial.target, ReferenceAdapter)
    decided = (lambda t: _decided(trial, w1.name, t)) if live_logs else None
    return take_over_then_thaw(trial, w1, job, decided=decided)


def _check_reached(pid: int | None, lib: str) -> None:
    """The process at the failpoint has libfaketime loaded; else the step would move a
    clock nobody reads and the cell would hold having proved nothing."""
    if pid is not None and loaded_in(pid) is False:
        raise Inconclusive(
            f"the worker at the failpoint (pid {pid}) has not loaded {lib}, so its wall "
            "clock cannot be stepped: it may be a static binary started by a script, or "
            "an image without the library"
        )


def _decided(trial: Trial, worker: str, since: float) -> bool:
    """The thawed owner called out, or said it gave the lease up, after ``since``."""
    trial.observer.drain()
    for e in trial.history.events():
        if e.t < since:
            continue
        if e.kind == "arrival" and e.fields.get("worker_id") == worker:
            return True
        if e.source == f"worker:{worker}" and e.kind in ("lease_expired", "result_write"):
            return True
    return False
