"""A provider that died mid-trial: restart it on its durable log and audit the log.

The harness does not kill providers; when one is found dead at the end of a trial,
something outside the trial killed it (the OOM killer, an operator, a chaos test of the
harness itself). The trial is then ``inconclusive``: the workers ran against a world
with a hole in it, and judging them by it would blame them for the harness's loss. What
can still be proved is the provider's own promise (fake_providers/README.md): nothing
it acknowledged is lost. So it is started again on the same port and state file, and
the reason says whether its log still holds every effect the harness saw committed and
one for each job the target reports acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.backends.base import describe_exit

if TYPE_CHECKING:
    from fake_providers import ProviderProcess
    from harness.trial import Trial


def provider_crash(trial: Trial) -> str | None:
    """None when every provider of ``trial`` is alive; else why the trial cannot be
    judged, with the audit of each dead provider's log after its restart."""
    dead = {name: p for name, p in trial.providers.items() if not p.alive()}
    if not dead:
        return None
    parts = []
    for name, provider in dead.items():
        how = describe_exit(provider.returncode)
        trial.history.append(
            f"provider:{name}", "note", text=f"provider {name} died mid-trial ({how})"
        )
        try:
            provider.restart()
        except Exception as exc:
            parts.append(
                f"provider {name} ({provider.kind}) died mid-trial ({how}) and did not "
                f"restart on its log: {exc}"
            )
            continue
        parts.append(
            f"provider {name} ({provider.kind}) died mid-trial ({how}); {_audit(trial, name)}"
        )
    return "; ".join(parts)


def _audit(trial: Trial, name: str) -> str:
    """What the restarted provider's log says about the effects it owed."""
    provider: ProviderProcess = trial.providers[name]
    try:
        logged = provider.client.effects()
    except Exception as exc:
        return f"restarted, but its log could not be read: {exc}"
    ids = {e.id for e in logged}
    seen = [e for e in trial.history.of_kind("commit") if e.source == f"provider:{name}"]
    lost = [e for e in seen if e.fields.get("id") not in ids]
    with_effect = {e.job_id for e in logged}
    states = None
    if trial.target is not None and name == trial.provider_name:
        try:
            states = trial.target.job_states(trial.jobs)
        except Exception:
            states = None
    acked = (
        []
        if states is None
        else [job for job, s in states.items() if s.delivery_state == "acknowledged"]
    )
    missing = [job for job in acked if job not in with_effect]
    if lost or missing:
        what = [f"effect {e.fields.get('id')} of {e.job}" for e in lost]
        what += [f"acknowledged {job}" for job in missing]
        return f"restarted on its log, which LOST {', '.join(what)}"
    told = f"all {len(seen)} effects seen committed"
    if states is not None:
        told += f" and an effect for each of the {len(acked)} acknowledged jobs"
    return f"restarted on its log, which holds {told} ({len(logged)} effects in all)"
