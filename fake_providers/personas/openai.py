"""The ``openai`` persona: an OpenAI-compatible chat-completions model that answers plans.

An agent loop built on the official SDK asks the model what to do for a job; the model
answers tool calls (``charge``, ``notify``) that the agent then performs against other
providers. The model commits nothing: each chat completion is recorded as an arrival
of kind ``plan`` for the job (never a write, never a lookup that could read as a
reconcile), under the same identity and fault board as every provider. Its answers are
scripted from the job's document (:mod:`fake_providers.personas.openai_plan`), so a run
is deterministic, and the ``replan`` faults make a retried job's next plan another one:
the model is the least deterministic part of the loop, and the runtime, not the model,
must decide whether work may start again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from fake_providers.faults import FaultBoard
from fake_providers.fingerprint import fingerprint
from fake_providers.identity import IdentityBoard
from fake_providers.messages import DROP, Reply, Request, parse_object
from fake_providers.models import PLAN, PLAN_ACTIONS
from fake_providers.personas import openai_plan as script
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.problems import Problem
from fake_providers.store import ArrivalIn

#: The one model this persona lists; any model name is answered all the same.
MODEL = "crashpoint-planner"
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
#: Faults that refuse the model's answer with their status (a 5xx, or 429).
_FAIL_ACTIONS = ("fail_before_commit", "fail_lookup")


class OpenAIPersona:
    name = "openai"
    kind = "plain"
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        if path == CHAT_PATH:
            return {"POST": lambda: self._chat(host, req, path)}
        if path == MODELS_PATH:
            return {"GET": lambda: host.lookup(req, path, job_id=None, answer=_model_list)}
        if path.startswith(MODELS_PATH + "/") and path.count("/") == 3:
            model = path.rsplit("/", 1)[1]
            return {
                "GET": lambda: host.lookup(req, path, job_id=None, answer=lambda: _model(model))
            }
        return None

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        raise Problem(
            500,
            "the openai persona commits no effect; a write reached it by mistake",
            code="provider_bug",
        )

    def error(self, problem: Problem, *, path: str) -> Reply:
        """``problem`` in OpenAI's envelope, so the SDK raises its own error class."""
        status = problem.status
        kind, code = _ENVELOPES.get(status, ("invalid_request_error", None))
        if status >= 500:
            kind, code = "server_error", "server_error"
        if problem.code == "method_not_allowed":
            code = "method_not_allowed"
        body = {
            "error": {
                "message": problem.detail,
                "type": kind,
                "param": getattr(problem, "param", None),
                "code": code,
            }
        }
        return Reply.json(status, body, headers=problem.headers)

    # -- the model ------------------------------------------------------------------

    def _chat(self, host: Host, req: Request, path: str) -> Reply:
        board, identities = _boards(host)
        body: dict[str, Any] | None = None
        problem: Problem | None = None
        convo: script.Conversation | None = None
        try:
            body = parse_object(req.body)
            convo = script.read(body)
        except Problem as p:
            problem = p
        job = convo.job_id if convo is not None else None
        arrival_id = host.store.record_arrival(
            ArrivalIn(
                kind=PLAN,
                method=req.method,
                path=path,
                job_id=job,
                fingerprint=fingerprint(body, kind="idempotent") if body is not None else None,
                fencing_token=req.headers.get("x-fencing-token"),
                worker_id=req.headers.get("x-worker-id"),
                peer_pid=req.peer_pid,
                identity=req.headers.get("x-crashpoint-identity") or None,
            )
        )
        fault: str | None = None
        try:
            # A refused identity is refused before anything is read, as for every write.
            identities.check(req.headers.get("x-crashpoint-identity") or None)
            if problem is not None or convo is None:
                raise problem or Problem(400, "body is missing; send a JSON object")
            if job is None:
                raise script.BadParam(
                    "messages",
                    "no job id in the messages; put the job's JSON document (with its "
                    "job_id) in a user message, or its id (j-0001) in the text",
                )
            failing = board.take(_FAIL_ACTIONS, job=job, key=None, marker=None)
            if failing is not None:
                fault = failing.fault.action
                raise Problem(
                    failing.fault.status,
                    f"injected failure of the model (fault {failing.id}); no plan was made",
                    code="injected_failure",
                )
            doc, fault = self._answer(host, board, convo, arrival_id, req, body or {})
            reply = Reply.json(200, doc, headers=(("x-request-id", f"req_{arrival_id:06d}"),))
        except Problem as p:
            reply = self.error(p, path=path)
        return self._deliver(host, board, arrival_id, job, reply, fault)

    def _answer(
        self,
        host: Host,
        board: FaultBoard,
        convo: script.Conversation,
        arrival_id: int,
        req: Request,
        body: Mapping[str, Any],
    ) -> tuple[dict[str, Any], str | None]:
        """The completion for ``convo``: tool calls on an opening ask, else the final text."""
        fault: str | None = None
        replan, changed = 0, False
        if convo.opening and convo.job_id is not None:
            earlier = [
                a
                for a in host.store.arrivals()
                if a["kind"] == PLAN and a["job_id"] == convo.job_id and a["id"] < arrival_id
            ]
            # A retry is an opening ask after a plan was delivered: the model's own
            # answers to the SDK's retries of a failed call are not re-plans.
            if any(a["status"] == 200 for a in earlier):
                armed = board.take(PLAN_ACTIONS, job=convo.job_id, key=None, marker=None)
                if armed is not None:
                    fault = armed.fault.action
                    replan = 1 + sum(a["fault"] in PLAN_ACTIONS for a in earlier)
                    changed = fault == "replan_changed"
        calls = script.plan(convo, replan=replan, changed=changed) if convo.opening else ()
        if calls:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                ],
            }
            finish = "tool_calls"
        else:
            text = script.final_text(convo)
            message = {"role": "assistant", "content": text, "refusal": None}
            finish = "stop"
        said = len(json.dumps(message))
        doc = {
            "id": f"chatcmpl-{host.name}-{arrival_id:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or MODEL),
            "system_fingerprint": "fp_crashpoint",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": max(1, len(req.body) // 4),
                "completion_tokens": max(1, said // 4),
                "total_tokens": max(1, len(req.body) // 4) + max(1, said // 4),
            },
        }
        return doc, fault

    def _deliver(
        self,
        host: Host,
        board: FaultBoard,
        arrival_id: int,
        job: str | None,
        reply: Reply,
        fault: str | None,
    ) -> Reply:
        """Send the answer as the armed faults say: dropped (the model answered, the
        client never hears it), late, or now; then record how the request ended."""
        if reply.status == 200:
            drop = board.take(("drop_after_commit",), job=job, key=None, marker=None)
            if drop is not None:
                host.store.finish_arrival(arrival_id, status=None, fault="drop_after_commit")
                return DROP
        # Errors are late too, as on every provider: a delay is the network's, not the model's.
        delay = board.take(("delay_response",), job=job, key=None, marker=None)
        if delay is not None:
            board.pause(delay.fault.delay_s)
            fault = fault or "delay_response"
        host.store.finish_arrival(arrival_id, status=reply.status, fault=fault)
        return reply


#: Status -> OpenAI's error ``type`` and ``code`` (5xx: ``server_error``).
_ENVELOPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def _boards(host: Host) -> tuple[FaultBoard, IdentityBoard]:
    """The provider's fault and identity boards: a plan is faulted and refused as a
    write is, but it is no write (nothing to commit), so it cannot go through one."""
    board, identities = getattr(host, "board", None), getattr(host, "identities", None)
    if not isinstance(board, FaultBoard) or not isinstance(identities, IdentityBoard):
        raise Problem(
            500,
            f"the openai persona needs a provider with a fault board and identities, "
            f"not {type(host).__name__}",
            code="provider_bug",
        )
    return board, identities


def _model_doc(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "crashpoint"}


def _model_list() -> Reply:
    return Reply.json(200, {"object": "list", "data": [_model_doc(MODEL)]})


def _model(model: str) -> Reply:
    if model != MODEL:
        raise Problem(
            404,
            f"The model {model!r} does not exist; this persona lists {MODEL!r} "
            f"(and answers chat completions for any model name)",
            code="not_found",
        )
    return Reply.json(200, _model_doc(MODEL))


PERSONA = OpenAIPersona()
