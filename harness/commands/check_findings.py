"""check-config's findings: a :class:`Seen` turned into lines, in the order a user fixes
them, each with a check mark or a cross and what to fix. No I/O: every message is
unit-tested.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.commands.check_lines import FAIL, OK, SKIP, WARN, Line
from harness.commands.check_orders import order_lines
from harness.commands.check_watch import JOB, Seen, job_effects
from harness.contract.env import provider_env_var
from harness.targets.config import ProviderDecl
from harness.targets.config_routes import describe
from harness.targets.personas import write_hint

#: The boundaries a job passes when nothing goes wrong, in order.
HAPPY_POINTS = ("after_claim", "before_external_call", "after_external_call", "after_local_write")
#: The ones the crash scenarios hold a worker at; missing them makes those cells inconclusive.
HELD_POINTS = ("before_external_call", "after_external_call")
_WRITE_PATH = {"idempotent": "/v1/effects", "plain": "/v1/sends", "unqueryable": "/v1/sends"}
#: The write tool of an MCP provider, by kind (fake_providers.tools has the whole table).
_TOOL = {"idempotent": "create_ticket", "plain": "send_message", "unqueryable": "send_message"}


def judge(seen: Seen) -> list[Line]:
    """The findings, in the order a user fixes them."""
    config = seen.config
    first = config.providers[0]
    if seen.enqueue_error is not None:
        return [Line(FAIL, seen.enqueue_error)]
    lines: list[Line] = order_lines(seen.orders, JOB, status=config.status is not None)
    if seen.worker_exit not in (None, 0):
        said = f"; its stderr ends: {seen.worker_log}" if seen.worker_log else ""
        lines.append(
            Line(
                FAIL,
                f"the worker exited with status {seen.worker_exit}{said}",
                "its stderr says why; a worker keeps serving jobs until crashpoint stops it",
            )
        )
    for p in config.providers:
        lines.append(_provider_line(seen, p, first=p.name == first.name))
        if p.persona is not None:
            lines.extend(_persona_lines(seen, p))
    writes = [a for a in seen.arrivals.get(first.name, []) if a.kind == "write"]
    if writes:
        lines.append(_write_line(writes[0], first.kind, persona=first.persona))
    lines.append(_failpoint_line(seen))
    lines.append(_status_line(seen))
    lines.append(_effect_line(seen))
    return lines


def _provider_line(seen: Seen, p: ProviderDecl, *, first: bool) -> Line:
    name = p.name
    arrivals = seen.arrivals.get(name, [])
    var = provider_env_var(name)
    if arrivals:
        shown = ", ".join(f"{a.method} {a.path} {a.status or 'no answer'}" for a in arrivals[:3])
        read = f"{var} (or {p.env})" if p.env else var
        return Line(OK, f"the worker read {read}: {len(arrivals)} request(s) at {name} ({shown})")
    if not first:
        return Line(SKIP, f"no request at {name} (the check's one job is for another provider)")
    if p.persona is not None and seen.tapped.get(name):
        # Requests came, none the persona serves: _persona_lines names them.
        return Line(WARN, f"the worker read {var}, but {name} served none of its requests")
    if p.persona is not None:
        fix = f"point the {p.persona} SDK at the URL in {var}" + (f" (or {p.env})" if p.env else "")
        fix += f" and make {write_hint(p.persona)}"
    elif p.transport == "http":
        fix = f"read the URL from {var} and POST {_WRITE_PATH[p.kind]} there for each job"
    else:
        fix = f"read the URL from {var} and call its tool {_TOOL[p.kind]} at URL/mcp for each job"
    return Line(FAIL, f"no request reached provider {name} in {seen.waited_s:.0f} s", fix)


def wire(p: ProviderDecl) -> str:
    """A provider's kind as the file names it: ``stripe over idempotent``, or the kind."""
    return f"{p.persona} over {p.kind}" if p.persona is not None else p.kind


def _persona_lines(seen: Seen, p: ProviderDecl) -> list[Line]:
    """The persona calls the worker made, and any it made to a path the persona lacks."""
    assert p.persona is not None
    arrivals = seen.arrivals.get(p.name, [])
    calls = list(
        dict.fromkeys(f"{a.method} {a.path.split('?', 1)[0]} ({a.kind})" for a in arrivals)
    )
    table = p.route_table
    lines = [Line(OK, f"routes of {p.name}: {line}") for line in describe(table or {})]
    if calls:
        lines.append(Line(OK, f"{p.persona}: {', '.join(calls)}"))
    served = {(a.method, a.path.split("?", 1)[0]) for a in arrivals}
    unserved = list(
        dict.fromkeys(
            f"{t.method} {t.path}"
            for t in seen.tapped.get(p.name, [])
            if t.status in (404, 405) and (t.method, t.path) not in served
        )
    )
    if unserved and table is not None:
        lines.append(
            Line(
                FAIL,
                f"the worker sent {unserved[0]}, which matches no declared route (404)",
                f"declare it in [providers.routes] of {p.name}, or fix the client's path",
            )
        )
    elif unserved:
        lines.append(
            Line(
                FAIL,
                f"the worker called {', '.join(unserved)}, which the {p.persona} persona does "
                "not serve (404)",
                f"make {write_hint(p.persona)}; docs/providers.md lists what it serves",
            )
        )
    return lines


#: What a refused write most likely lacks, by the provider's status.
_REFUSED = {
    415: "send the body as JSON, with Content-Type: application/json",
    422: "the key was used before with another payload: send the job's body unchanged",
    409: "the key is still in flight: an attempt with the same key has not finished",
}


def _write_line(write: Any, kind: str, *, persona: str | None = None) -> Line:
    if kind == "idempotent" and not write.idempotency_key:
        return Line(
            FAIL,
            f"the write has no Idempotency-Key (the provider answered {write.status})",
            f"send one derived from the job id only, such as effect-{JOB}",
        )
    if write.status is not None and write.status >= 400:
        return Line(
            FAIL,
            f"the provider refused the write with {write.status}",
            f"make {write_hint(persona)}"
            if persona is not None
            else _REFUSED.get(
                write.status, "see the provider contract in fake_providers/README.md"
            ),
        )
    if write.job_id != JOB:
        return Line(
            FAIL,
            f"the write carries job_id {write.job_id!r}, not {JOB!r}",
            f"put the job's id where the {persona} persona reads it: {write_hint(persona)}"
            if persona is not None
            else "send the payload file's body unchanged: the provider reads job_id from it",
        )
    if kind != "idempotent" and not write.client_marker:
        return Line(
            FAIL,
            "the write has no client_marker"
            + (f" where the {persona} persona reads it" if persona else " in its body"),
            "add one derived from the job id, so a retry can look it up first"
            + (f" ({write_hint(persona)})" if persona else ""),
        )
    key = write.idempotency_key or write.client_marker
    carried = "the job's id" if persona is not None else "the job's body"
    return Line(OK, f"the write for {JOB} carries {key!r} and {carried}")


def _failpoint_line(seen: Seen) -> Line:
    if not seen.hits:
        return Line(
            FAIL,
            "no failpoint line arrived: the worker never used CRASHPOINT_FAILPOINTS",
            "call the failpoint client (crashpoint init copies one) at each boundary, such as "
            "failpoint('before_external_call', job, attempt); docs/failpoints.md",
        )
    mine = list(dict.fromkeys(point for point, job in seen.hits if job == JOB))
    if not mine:
        jobs = ", ".join(sorted({str(job) for _, job in seen.hits}))
        return Line(
            FAIL,
            f"failpoint lines arrived, but for job {jobs}, never {JOB}",
            "pass the job id crashpoint enqueued (job_id in the payload file)",
        )
    missing = [p for p in HAPPY_POINTS if p not in mine]
    text = f"failpoints reached for {JOB}: {', '.join(mine)}"
    held = [p for p in missing if p in HELD_POINTS]
    if held:
        return Line(
            WARN,
            f"{text}; never {', '.join(held)}",
            "the cells that hold a worker there will be inconclusive; call failpoint() at "
            "those boundaries too",
        )
    return Line(OK, text + (f" (not {', '.join(missing)})" if missing else ""))


def _status_line(seen: Seen) -> Line:
    if seen.status_error is not None:
        return Line(FAIL, seen.status_error)
    if seen.config.status is None:
        return Line(
            SKIP,
            "no status command: the end state is judged from the provider's records alone",
            "",
        )
    status = seen.status
    if status is not None and status.state == "done":
        attempts = f" after {status.attempts} attempt(s)" if status.attempts is not None else ""
        return Line(OK, f"status says {JOB} is done{attempts}")
    state = status.state if status is not None else "nothing"
    why = f" ({status.last_error})" if status is not None and status.last_error else ""
    return Line(
        FAIL,
        f"status says {JOB} is {state}{why} after {seen.waited_s:.0f} s",
        "print done once the job's effect is confirmed",
    )


def _effect_line(seen: Seen) -> Line:
    effects = job_effects(seen)
    per = Counter(e.provider for e in effects)
    where = ", ".join(sorted(per))
    # A job owes one effect at each provider it calls (a charge, then a receipt).
    twice = sorted(name for name, n in per.items() if n > 1)
    if effects and not twice:
        return Line(OK, f"exactly one effect for {JOB} at each of {where}")
    if effects:
        shown = "; ".join(f"{per[name]} effects for {JOB} at {name}" for name in twice)
        return Line(
            FAIL,
            f"{shown}: it was sent more than once",
            "derive the idempotency key (or client_marker) from the job id and send each job once",
        )
    return Line(
        FAIL,
        f"no effect for {JOB} in {seen.waited_s:.0f} s",
        "the lines above say where the job stopped",
    )
