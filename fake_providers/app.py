"""What a provider does with one request, independent of sockets.

``ProviderApp.handle`` takes a parsed ``Request`` and returns a ``Reply`` (or a reply
that says to drop the connection). Holds and delays block the calling thread, which is
one per connection in the HTTP server; the unit tests drive this class directly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import parse_qs, urlsplit

from fake_providers.control import ControlAPI, Listener
from fake_providers.faults import Armed, FaultBoard, Hold
from fake_providers.fingerprint import MARKER_FIELD, canonical_json, fingerprint
from fake_providers.identity import IdentityBoard
from fake_providers.messages import (
    DROP,
    JSON_TYPE,
    Reply,
    Request,
    first_param,
    non_negative_int,
    parse_object,
)
from fake_providers.models import DENIED, KINDS
from fake_providers.openapi import describe
from fake_providers.personas import Parsed, Persona, persona_for
from fake_providers.problems import PROBLEM_TYPE, Problem
from fake_providers.seal import SECRET_HEADER, authorized, is_sealed
from fake_providers.store import ArrivalIn, Store
from fake_providers.tools import MCP_PATH, TRANSPORTS, tools_for

if TYPE_CHECKING:
    from fake_providers.mcp_tools import McpEndpoint

MAX_BODY_BYTES = 1 << 20
#: SQLite's largest integer: no arrival id is above it, so ``after`` never needs to be.
_MAX_ID = (1 << 63) - 1

WRITE_PATHS = {"idempotent": "/v1/effects", "plain": "/v1/sends", "unqueryable": "/v1/sends"}
_COMMIT_PATH_ACTIONS = ("hold_before_commit", "hold_after_commit", "drop_after_commit")


@dataclass
class _Write:
    """A write after parsing: the fields every arrival records."""

    arrival_id: int
    parsed: Parsed
    job_id: str | None
    key: str | None
    marker: str | None
    fingerprint: str
    #: The commit already recorded the final status: saves one fsync per write.
    finished: bool = False
    #: The answer is the stored one of an earlier request under the same key.
    replayed: bool = False
    #: Headers a persona's answer to the commit carries (X-Message-Id, Request-Id).
    headers: tuple[tuple[str, str], ...] = ()


class ProviderApp:
    def __init__(
        self,
        *,
        kind: str,
        name: str,
        store: Store,
        board: FaultBoard | None = None,
        sleep: Callable[[float], None] | None = None,
        secret: str | None = None,
        transport: str = "http",
        tool_hints: Mapping[str, bool] | None = None,
        server: tuple[str, int] = ("127.0.0.1", 0),
        routes: Mapping[str, Any] | None = None,
    ) -> None:
        #: The wire format in front of the kind, when ``kind`` names a persona (stripe, ...);
        #: ``routes`` is the table of a declared one (``http``).
        self.persona: Persona | None = persona_for(kind, routes)
        if self.persona is not None:
            kind = self.persona.kind
        if kind not in KINDS:
            raise ValueError(f"provider kind={kind!r} is unknown; use one of {', '.join(KINDS)}")
        if transport not in TRANSPORTS:
            raise ValueError(
                f"transport={transport!r} is unknown; use one of {', '.join(TRANSPORTS)}"
            )
        self.kind = kind
        self.name = name
        self.store = store
        self.board = board or FaultBoard()
        self.identities = IdentityBoard()
        self.control = ControlAPI(
            self.board, kind=kind, name=name, store=store, identities=self.identities
        )
        # A delay ends early when a wipe drains the board (no request outlives a trial).
        self._sleep = sleep if sleep is not None else self.board.pause
        #: None leaves the control and oracle APIs open (unit tests, ``--no-secret``).
        self.secret = secret
        self.write_path = WRITE_PATHS[kind]
        self._description = describe(kind, hold_max_s=self.board.hold_max_s)
        self.transport = transport
        #: The tools ``/mcp`` serves (a provider started with transport "mcp" only).
        self.tools = tools_for(kind, tool_hints) if transport == "mcp" else ()
        self.mcp: McpEndpoint | None = None
        if transport == "mcp":
            from fake_providers.mcp_tools import McpEndpoint

            self.mcp = McpEndpoint(
                name=name,
                tools=self.tools,
                write=self.tool_write,
                lookup=self.tool_lookup,
                server=server,
            )

    @property
    def listeners(self) -> list[Listener]:
        """The provider's ports besides HTTP (an smtp provider's SMTP listener)."""
        return self.control.listeners

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()
        if self.mcp is not None:
            self.mcp.close()

    def wants_peer_pid(self, path: str, headers: Mapping[str, str]) -> bool:
        """Whether this request's sender is worth a /proc scan: workers, never the harness."""
        if is_sealed(path):
            return not authorized(headers, self.secret)
        if self.persona is not None:
            return path != "/openapi.json"  # a vendor's paths are anywhere
        return path.startswith(("/v1/", MCP_PATH))

    # -- routing --------------------------------------------------------------------

    def handle(self, req: Request) -> Reply:
        url = urlsplit(req.target)
        path, query = url.path, parse_qs(url.query, keep_blank_values=True)
        try:
            return self._route(req, path, query, url.query.encode("latin-1", "replace"))
        except Problem as p:
            return self.error(p, path)
        except Exception as exc:  # the fake must never answer a bare 500
            bug = Problem(500, f"provider bug: {type(exc).__name__}: {exc}", code="provider_bug")
            return self.error(bug, path)

    def error(self, p: Problem, path: str) -> Reply:
        """``p`` as this provider answers it: a problem document, or the persona's envelope
        (never on the sealed control and oracle APIs, which are the harness's own)."""
        if self.persona is None or is_sealed(path):
            return Reply.problem(p, instance=path)
        return self.persona.error(p, path=path)

    def _route(
        self, req: Request, path: str, query: dict[str, list[str]], query_raw: bytes = b""
    ) -> Reply:
        if is_sealed(path) and not authorized(req.headers, self.secret):
            self._deny(req, path)
        routes: dict[str, Mapping[str, Callable[[], Reply]]] = {
            "/openapi.json": {"GET": lambda: Reply.json(200, self._description)},
            "/_oracle/arrivals": {
                "GET": lambda: Reply.json(200, self.store.arrivals(after=_after(query)))
            },
            "/_oracle/effects": {"GET": lambda: Reply.json(200, self.store.effects())},
            "/_oracle/releases": {"GET": lambda: Reply.json(200, self.store.releases())},
            "/_oracle/tools": {"GET": lambda: Reply.json(200, [t.to_json() for t in self.tools])},
            MCP_PATH: {m: lambda: self._mcp(req, query_raw) for m in ("POST", "GET", "DELETE")},
        }
        if self.persona is None:
            routes[self.write_path] = {
                "POST": lambda: self._write(req, path),
                "GET": lambda: self._lookup(req, path, query),
            }
        methods = routes.get(path)
        if methods is None and self.persona is not None and not is_sealed(path):
            methods = self.persona.routes(self, req, path, query)
        if methods is None and path.startswith("/_control/"):
            methods = self.control.routes(req, path, query)
        if methods is None:
            of = self.persona.name if self.persona is not None else self.kind
            raise Problem(404, f"no route {path!r} on a {of} provider", code="not_found")
        action = methods.get(req.method)
        if action is None:
            allowed = ", ".join(methods)
            raise Problem(
                405,
                f"{req.method} is not allowed on {path}; allowed: {allowed}",
                headers=(("Allow", allowed),),
                code="method_not_allowed",
            )
        return action()

    def _deny(self, req: Request, path: str) -> NoReturn:
        """Record a control or oracle call without the secret, then refuse it with 403."""
        self.store.record_arrival(
            ArrivalIn(
                kind=DENIED,
                method=req.method,
                path=path,
                fencing_token=req.headers.get("x-fencing-token"),
                worker_id=req.headers.get("x-worker-id"),
                peer_pid=req.peer_pid,
                status=403,
            )
        )
        why = "without" if SECRET_HEADER.lower() not in req.headers else "with a wrong"
        # No arrival id in the answer: it would tell the sender how busy the provider is.
        raise Problem(
            403,
            f"{req.method} {path} {why} {SECRET_HEADER} header: the control and oracle APIs "
            f"answer only the harness that started this provider; this attempt is recorded",
        )

    # -- business API ---------------------------------------------------------------

    def _mcp(self, req: Request, query: bytes) -> Reply:
        if self.mcp is None:
            raise Problem(
                404,
                f"this {self.kind} provider speaks HTTP, not MCP; declare "
                f'transport = "mcp" for it (or start it with --transport mcp)',
            )
        return self.mcp.handle(req, query)

    def tool_write(self, req: Request, path: str) -> Reply:
        """A tool call's write: the kind's write, recorded under the tool's ``path``."""
        try:
            return self._write(req, path)
        except Problem as p:
            return Reply.problem(p, instance=path)

    def tool_lookup(self, req: Request, path: str, query: dict[str, list[str]]) -> Reply:
        """A tool call's lookup: the kind's lookup, recorded under the tool's ``path``."""
        try:
            return self._lookup(req, path, query)
        except Problem as p:
            return Reply.problem(p, instance=path)

    def _write(self, req: Request, path: str) -> Reply:
        return self.write(req, path, self._parse_json_write(req))

    def write(self, req: Request, path: str, parsed: Parsed | Problem) -> Reply:
        """Record a write read off the wire (by the kind's own API or a persona's), then
        fault, key-check and commit it; errors come back as replies in the wire's shape."""
        try:
            w = self._record_write(req, path, parsed)
        except Problem as p:
            return self.error(p, path)
        delay = self.board.take(("delay_response",), job=w.job_id, key=w.key, marker=w.marker)
        reply, fault = self._execute(w, path)
        if delay is not None and not reply.drop:
            self._sleep(delay.fault.delay_s)
            fault = fault or "delay_response"
        if w.finished and fault is None:
            return reply
        self.store.finish_arrival(
            w.arrival_id,
            status=None if reply.drop else reply.recorded_status,
            # From the key's state, not the answer's headers: a persona whose vendor marks
            # no replay (Resend) still replays, and the oracle must read it as one.
            replayed=w.replayed,
            fault=fault,
        )
        return reply

    @property
    def _replay_header(self) -> tuple[str, str] | None:
        if self.persona is not None:
            return self.persona.replay_header
        return ("Idempotent-Replayed", "true")

    def _parse_json_write(self, req: Request) -> Parsed | Problem:
        """A write to the kind's own API: a JSON object carrying ``job_id``."""
        parsed = _parse_body(req)
        if isinstance(parsed, Problem):
            return parsed
        return Parsed(
            payload={k: v for k, v in parsed.items() if k != MARKER_FIELD}
            if self.kind != "idempotent"
            else parsed,
            job_id=_str_field(parsed, "job_id"),
            key=req.headers.get("idempotency-key") if self.kind == "idempotent" else None,
            marker=_str_field(parsed, MARKER_FIELD),
            extra={"body": parsed},
        )

    def _record_write(self, req: Request, path: str, parsed: Parsed | Problem) -> _Write:
        p = parsed if isinstance(parsed, Parsed) else None
        body = p.payload if p is not None else None
        job_id = p.job_id if p is not None else None
        marker = p.marker if p is not None else None
        key = (p.key or None) if p is not None and self.kind == "idempotent" else None
        # The payload holds no marker (the persona's or _parse_json_write's doing), so one
        # fingerprint serves every kind.
        fp = fingerprint(body, kind="idempotent") if body is not None else None
        arrival_id = self.store.record_arrival(
            ArrivalIn(
                kind="write",
                method=req.method,
                path=path,
                job_id=job_id,
                idempotency_key=key,
                client_marker=marker,
                fingerprint=fp,
                fencing_token=req.headers.get("x-fencing-token"),
                worker_id=req.headers.get("x-worker-id"),
                peer_pid=req.peer_pid,
                identity=_identity(req),
            )
        )
        try:
            # An identity that is no longer good is refused before anything else is read.
            self.identities.check(_identity(req))
        except Problem as refused:
            self.store.finish_arrival(arrival_id, status=refused.status)
            raise
        problem = parsed if isinstance(parsed, Problem) else None
        if problem is None and self.kind == "idempotent" and not key:
            problem = Problem(
                400,
                "Idempotency-Key header is missing; send one per logical job",
                code="missing_key",
            )
        if problem is None and self.kind == "plain" and marker is None:
            problem = Problem(
                422, f"body.{MARKER_FIELD} is missing or not a string; the worker must choose one"
            )
        if (
            problem is None
            and self.persona is None
            and self.kind == "unqueryable"
            and marker is None
        ):
            problem = Problem(
                422, f"body.{MARKER_FIELD} is missing or not a string; the worker must choose one"
            )
        if problem is not None or p is None or body is None or fp is None:
            problem = problem or Problem(400, "body is missing; send a JSON object")
            self.store.finish_arrival(arrival_id, status=problem.status)
            raise problem
        return _Write(arrival_id, p, job_id, key, marker, fp)

    def _execute(self, w: _Write, path: str) -> tuple[Reply, str | None]:
        """Run a parsed write; returns the reply and the fault that acted on it."""
        failing = self.board.take(("fail_before_commit",), job=w.job_id, key=w.key, marker=w.marker)
        if failing is not None:
            p = Problem(
                failing.fault.status,
                f"injected failure before commit (fault {failing.id}); nothing was committed",
                code="injected_failure",
            )
            return self.error(p, path), "fail_before_commit"
        if w.key is not None:
            decision = self.store.reserve_key(w.key, w.fingerprint)
            if decision.outcome == "mismatch":
                p = Problem(
                    422,
                    f"Idempotency-Key {w.key!r} was first used with a different payload; "
                    f"send the original payload or a new key",
                    code="key_mismatch",
                )
                return self.error(p, path), None
            if decision.outcome == "in_flight":
                p = Problem(
                    409,
                    f"a request with Idempotency-Key {w.key!r} is still in flight; "
                    f"retry later or look it up",
                    code="key_in_flight",
                )
                return self.error(p, path), None
            if decision.outcome == "replay":
                w.replayed = True
                replay = self._replay_header
                return (
                    Reply(
                        decision.status,
                        decision.body,
                        self._stored_type(decision.status),
                        (replay,) if replay is not None else (),
                    ),
                    None,
                )
            if w.job_id is None:
                # Execution began and failed on business validation: store the error so a
                # retry under the same key replays it, as the IETF draft allows.
                stored = self.error(self._no_job(), path)
                self.store.complete_key(w.key, stored.status, stored.body)
                return stored, None
        elif w.job_id is None:
            return self.error(self._no_job(), path), None
        return self._commit_path(w)

    def _no_job(self) -> Problem:
        where = "body.job_id" if self.persona is None else "the job's id"
        return Problem(422, f"{where} is missing or not a string; send the job's id")

    def _stored_type(self, status: int) -> str:
        return JSON_TYPE if status < 400 or self.persona is not None else PROBLEM_TYPE

    def _commit_path(self, w: _Write) -> tuple[Reply, str | None]:
        try:
            return self._commit_path_inner(w)
        except BaseException:
            # Whatever broke, a key left in flight would answer 409 forever; free it
            # (a no-op once the commit turned it into a completed key).
            if w.key is not None:
                self.store.release_key(w.key)
            raise

    def _commit_path_inner(self, w: _Write) -> tuple[Reply, str | None]:
        armed = self.board.take(_COMMIT_PATH_ACTIONS, job=w.job_id, key=w.key, marker=w.marker)
        action = armed.fault.action if armed is not None else None
        if armed is not None:
            self.store.mark_fault(w.arrival_id, armed.fault.action)
        if armed is not None and action == "hold_before_commit":
            outcome = self._hold(armed, w, committed=False, effect_id=None)
            if outcome == "drop":
                if w.key is not None:
                    self.store.release_key(w.key)
                return DROP, action
        effect_id, status, body = self.store.commit_effect(
            arrival_id=w.arrival_id,
            job_id=w.job_id,
            fingerprint=w.fingerprint,
            key=w.key,
            marker=w.marker,
            respond=self._respond(w),
            keep=self._keep(w),
        )
        if (
            armed is not None
            and action == "hold_after_commit"
            and self._hold(armed, w, committed=True, effect_id=effect_id) == "drop"
        ):
            return DROP, action
        if action == "drop_after_commit":
            return DROP, action
        w.finished = action is None
        return Reply(status, body, headers=w.headers), action

    def _respond(self, w: _Write) -> Callable[[dict[str, Any]], tuple[int, bytes]]:
        persona = self.persona
        if persona is None:
            return self._created

        def respond(effect: dict[str, Any]) -> tuple[int, bytes]:
            made = persona.created(w.parsed, effect)
            w.headers = made.headers
            return made.status, made.body

        return respond

    def _keep(self, w: _Write) -> Callable[[dict[str, Any]], tuple[str, str, str]] | None:
        persona = self.persona
        if persona is None:
            return None

        def keep(effect: dict[str, Any]) -> tuple[str, str, str]:
            made = persona.created(w.parsed, effect)
            return made.object_id, w.parsed.resource, json.dumps(made.obj, separators=(",", ":"))

        return keep

    def _created(self, effect: dict[str, Any]) -> tuple[int, bytes]:
        doc = {
            "id": effect["id"],
            "object": "effect" if self.kind == "idempotent" else "send",
            "job_id": effect["job_id"],
            "idempotency_key": effect["idempotency_key"],
            "client_marker": effect["client_marker"],
            "fingerprint": effect["fingerprint"],
            "created": effect["t_wall"],
            "external_id": effect["external_id"],
        }
        return 201, json.dumps(doc, separators=(",", ":")).encode()

    def _hold(self, armed: Armed, w: _Write, *, committed: bool, effect_id: int | None) -> str:
        hold = Hold(
            fault_id=armed.id,
            action=armed.fault.action,
            arrival_id=w.arrival_id,
            job_id=w.job_id,
            idempotency_key=w.key,
            client_marker=w.marker,
            committed=committed,
            effect_id=effect_id,
        )
        fault = armed.fault
        if fault.release_after_s is not None:
            hold.deadline = hold.t_mono + fault.release_after_s
            hold.deadline_outcome = "drop" if fault.release_outcome == "drop" else "commit"
        try:
            return self.board.hold(armed, hold)
        finally:
            # How the hold ended, in the provider's log: the history's release event.
            self.store.record_release(
                arrival_id=w.arrival_id,
                fault_id=armed.id,
                action=fault.action,
                job_id=w.job_id,
                outcome=hold.outcome or "drop",
                released_by=hold.released_by or "reset",
                t_mono=hold.released_t if hold.released_t is not None else time.monotonic(),
            )

    def _lookup(self, req: Request, path: str, query: dict[str, list[str]]) -> Reply:
        param = "idempotency_key" if self.kind == "idempotent" else MARKER_FIELD
        value = first_param(query, param)
        # Lookups carry no body; the job is the one whose writes carried this key or
        # marker, so the oracle can tie a reconcile to its job.
        job_id = first_param(query, "job_id") or (
            self.store.job_of(param, value) if value else None
        )
        arrival_id = self.store.record_arrival(
            ArrivalIn(
                kind="lookup",
                method=req.method,
                path=path,
                job_id=job_id,
                idempotency_key=value if param == "idempotency_key" else None,
                client_marker=value if param == MARKER_FIELD else None,
                fencing_token=req.headers.get("x-fencing-token"),
                worker_id=req.headers.get("x-worker-id"),
                peer_pid=req.peer_pid,
                identity=_identity(req),
            )
        )
        fault: str | None = None
        try:
            self.identities.check(_identity(req))
            reply, fault = self._answer_lookup(param, value, job_id)
        except Problem as p:
            reply = Reply.problem(p, instance=path)
        self.store.finish_arrival(arrival_id, status=reply.status, fault=fault)
        return reply

    def lookup(
        self,
        req: Request,
        path: str,
        *,
        job_id: str | None,
        key: str | None = None,
        marker: str | None = None,
        answer: Callable[[], Reply],
    ) -> Reply:
        """A persona's lookup (a retrieve, a list, a search): recorded as an arrival of
        kind ``lookup`` for ``job_id``, refused under a bad identity, failed by an armed
        ``fail_lookup``, otherwise ``answer()`` (which may raise a Problem)."""
        arrival_id = self.store.record_arrival(
            ArrivalIn(
                kind="lookup",
                method=req.method,
                path=path,
                job_id=job_id,
                idempotency_key=key,
                client_marker=marker,
                fencing_token=req.headers.get("x-fencing-token"),
                worker_id=req.headers.get("x-worker-id"),
                peer_pid=req.peer_pid,
                identity=_identity(req),
            )
        )
        fault: str | None = None
        try:
            self.identities.check(_identity(req))
            failing = self.board.take(("fail_lookup",), job=job_id, key=key, marker=marker)
            if failing is not None:
                fault = "fail_lookup"
                raise Problem(
                    failing.fault.status,
                    f"injected lookup failure (fault {failing.id}); retry later",
                    code="injected_failure",
                )
            reply = answer()
        except Problem as p:
            reply = self.error(p, path)
        self.store.finish_arrival(arrival_id, status=reply.recorded_status, fault=fault)
        return reply

    def _answer_lookup(
        self, param: str, value: str | None, job_id: str | None
    ) -> tuple[Reply, str | None]:
        if self.kind == "unqueryable":
            raise Problem(
                501,
                "this provider cannot look up past sends; treat unknowns as review",
                code="no_lookup",
            )
        if not value:
            raise Problem(400, f"query parameter {param!r} is missing; pass ?{param}=...")
        key = value if param == "idempotency_key" else None
        marker = value if param == MARKER_FIELD else None
        failing = self.board.take(("fail_lookup",), job=job_id, key=key, marker=marker)
        if failing is not None:
            p = Problem(
                failing.fault.status,
                f"injected lookup failure (fault {failing.id}); retry later",
                code="injected_failure",
            )
            return Reply.problem(p, instance=self.write_path), "fail_lookup"
        if key is not None:
            state = self.store.key_state(key)
            if state is None:
                raise Problem(
                    404,
                    f"no request with Idempotency-Key {key!r} (or it expired)",
                    code="not_found",
                )
            response = None
            if state.state == "completed" and state.body is not None:
                response = {"status": state.status, "body": json.loads(state.body)}
            return Reply.json(200, {"state": state.state, "response": response}), None
        return Reply.json(200, self.store.effects(marker=marker)), None


def _parse_body(req: Request) -> dict[str, Any] | Problem:
    ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != JSON_TYPE and not ctype.endswith("+json"):
        return Problem(415, f"Content-Type {ctype or '(none)'!r}; send application/json")
    try:
        parsed = parse_object(req.body)
        # JSON may escape half of a surrogate pair ("\ud800"); such a string has no UTF-8
        # form, so it could be neither fingerprinted nor stored.
        canonical_json(parsed)
    except Problem as p:
        return p
    except UnicodeEncodeError as exc:
        return Problem(
            400, f"body holds a string that is not valid Unicode ({exc.reason}); send UTF-8"
        )
    return parsed


def _after(query: dict[str, list[str]]) -> int:
    raw = first_param(query, "after")
    # Absent means from the start; present but empty ("?after=") is not an id.
    return 0 if raw is None else min(non_negative_int(raw, "after"), _MAX_ID)


def _identity(req: Request) -> str | None:
    return req.headers.get("x-crashpoint-identity") or None


def _str_field(body: dict[str, Any] | None, name: str) -> str | None:
    value = body.get(name) if body is not None else None
    return value if isinstance(value, str) else None


__all__ = ["MAX_BODY_BYTES", "ProviderApp", "Reply", "Request"]
