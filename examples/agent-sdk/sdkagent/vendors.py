"""The three vendors through their official SDKs, each answer classified for the protocol.

A write ends ``ok``, ``failed`` (a 5xx or 429: nothing was committed; the request never
left), ``unknown`` (no answer once the request left: a timeout, a reset; or Stripe's 409
``idempotency_key_in_use``: the same key is still in flight), ``conflict`` (Stripe's
key holds other parameters), ``identity`` (401/403: the job's account is not who we act
as; nothing happened) or ``refused`` (any other 4xx). A lookup ends like the RQ
example's: ``confirmed``, ``not_found``, ``conflict``, ``unavailable``, or ``identity``.

Every SDK is told not to retry by itself (Stripe ``max_network_retries=0``, OpenAI
``max_retries=0``, Slack ``retry_handlers=[]``): a retry the agent does not see is a
retry it cannot reconcile first (``slack_sdk`` resends a post whose connection reset).
"""

from __future__ import annotations

import json
import urllib.error
from dataclasses import dataclass
from typing import Any, cast

import openai
import stripe
from rqbilling.providers import Found, Sent
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

#: The tools the agent declares to the model.
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "charge",
            "description": "Charge the customer for the job (amount in cents, currency).",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "integer"}, "currency": {"type": "string"}},
                "required": ["amount", "currency"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "notify",
            "description": "Tell the billing channel the job was charged.",
            "parameters": {
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                "required": ["channel", "text"],
            },
        },
    },
]
SYSTEM = (
    "You are a billing agent. For the job below, call charge, then notify. "
    "Answer with tool calls only."
)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    raw: str


@dataclass(frozen=True)
class Plan:
    kind: str  # ok | failed | identity | refused
    detail: str
    calls: tuple[ToolCall, ...] = ()
    message: dict[str, Any] | None = None


def _headers(worker_id: str, token: int, identity: str | None) -> dict[str, str]:
    headers = {"X-Worker-Id": worker_id, "X-Fencing-Token": str(token)}
    if identity:
        headers["X-Crashpoint-Identity"] = identity
    return headers


class Model:
    """The planner: ``openai.OpenAI`` on the model provider, one client per job."""

    def __init__(
        self, base_url: str, timeout_s: float, worker_id: str, token: int, identity: str | None
    ) -> None:
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key="sk-crashpoint",
            max_retries=0,
            timeout=timeout_s,
            default_headers=_headers(worker_id, token, identity),
        )

    def ask(self, messages: list[dict[str, Any]]) -> Plan:
        try:
            done = self.client.chat.completions.create(
                model="gpt-4o-mini",
                messages=cast(Any, messages),
                tools=cast(Any, TOOLS),
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            return Plan("identity", f"model {exc.status_code}: {exc.message[:160]}")
        except (
            openai.APIConnectionError,
            openai.RateLimitError,
            openai.InternalServerError,
        ) as exc:
            # A plan is no effect: asking again is always safe.
            return Plan("failed", f"model: {type(exc).__name__}")
        except openai.APIStatusError as exc:
            return Plan("refused", f"model {exc.status_code}: {exc.message[:160]}")
        message = done.choices[0].message
        calls = []
        for c in message.tool_calls or []:
            fn = getattr(c, "function", None)
            if fn is None:
                continue
            try:
                args = json.loads(fn.arguments)
            except ValueError:
                return Plan("refused", f"model: arguments of {fn.name} are not JSON")
            calls.append(
                ToolCall(c.id, fn.name, args if isinstance(args, dict) else {}, fn.arguments)
            )
        return Plan(
            "ok",
            f"model: {len(calls)} tool call(s)",
            tuple(calls),
            message.model_dump(exclude_none=True),
        )


class Billing:
    """Stripe through ``stripe.StripeClient``: PaymentIntents, searched by metadata."""

    def __init__(
        self, url: str, timeout_s: float, worker_id: str, token: int, identity: str | None
    ) -> None:
        self.client = stripe.StripeClient(
            "sk_test_crashpoint",
            base_addresses={"api": url},
            max_network_retries=0,
            http_client=stripe.RequestsClient(timeout=timeout_s),
        )
        self.headers = _headers(worker_id, token, identity)

    def charge(self, job_id: str, args: dict[str, Any], key: str | None) -> Sent:
        params: dict[str, Any] = {
            "amount": int(args["amount"]),
            "currency": str(args["currency"]),
            "confirm": True,
            "metadata": {"job_id": job_id},
        }
        options: dict[str, Any] = {"headers": self.headers}
        if key is not None:
            options["idempotency_key"] = key
        try:
            pi = self.client.v1.payment_intents.create(cast(Any, params), cast(Any, options))
        except stripe.APIConnectionError as exc:
            return Sent("unknown", f"stripe: no answer ({exc.user_message or 'connection'})")
        except stripe.IdempotencyError as exc:
            return Sent("conflict", f"stripe {exc.http_status}: {exc.user_message}")
        except (stripe.AuthenticationError, stripe.PermissionError) as exc:
            return Sent("identity", f"stripe {exc.http_status}: {exc.user_message}")
        except stripe.RateLimitError as exc:
            return Sent("failed", f"stripe {exc.http_status}: rate limited")
        except stripe.APIError as exc:
            if exc.http_status == 409:
                return Sent("in_use", f"stripe 409: {exc.code or 'idempotency_key_in_use'}")
            return Sent("failed", f"stripe {exc.http_status}: {exc.user_message}")
        except stripe.StripeError as exc:
            return Sent("refused", f"stripe {exc.http_status}: {exc.user_message}")
        return Sent("ok", f"stripe: {pi.id} {pi.status}", pi.id)

    def lookup(self, job_id: str) -> Found:
        query = f"metadata['job_id']:'{job_id}'"
        try:
            found = self.client.v1.payment_intents.search(
                {"query": query}, cast(Any, {"headers": self.headers})
            )
        except (stripe.AuthenticationError, stripe.PermissionError) as exc:
            return Found("identity", f"stripe search {exc.http_status}")
        except stripe.StripeError as exc:
            return Found("unavailable", f"stripe search: {type(exc).__name__}")
        ids = [pi.id for pi in found.data]
        if not ids:
            return Found("not_found", "no payment intent for the job")
        if len(ids) == 1:
            return Found("confirmed", f"payment intent {ids[0]}", ids[0])
        return Found("conflict", f"{len(ids)} payment intents for the job: {', '.join(ids)}")


class Chat:
    """Slack through ``slack_sdk.WebClient``: a post with the job in its metadata,
    looked up in ``conversations.history`` by its marker."""

    def __init__(
        self, url: str, timeout_s: float, worker_id: str, token: int, identity: str | None
    ) -> None:
        self.client = WebClient(
            token="xoxb-crashpoint",  # noqa: S106  (any token will do at the persona)
            base_url=url + "/api/",
            timeout=cast(int, timeout_s),  # a float reaches urllib as it is
            headers=_headers(worker_id, token, identity),
            retry_handlers=[],  # no silent resend of a post whose answer was lost
        )

    def post(self, job_id: str, args: dict[str, Any], marker: str) -> Sent:
        metadata = {
            "event_type": "billing_notice",
            "event_payload": {"job_id": job_id, "client_marker": marker},
        }
        try:
            res = self.client.chat_postMessage(
                channel=str(args["channel"]), text=str(args["text"]), metadata=metadata
            )
        except SlackApiError as exc:
            status = exc.response.status_code
            error = str(exc.response.get("error") or "")
            if status >= 500 or status == 429:
                return Sent("failed", f"slack {status} {error}")
            if error in ("token_expired", "invalid_auth"):
                return Sent("identity", f"slack {error}")
            return Sent("refused", f"slack {status} {error}")
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError):
                return Sent("failed", "slack: connection refused (not sent)")
            return Sent("unknown", f"slack: no answer ({exc.reason})")
        except (OSError, ValueError) as exc:
            # A timeout, a reset, a half answer: the post may be in the channel.
            return Sent("unknown", f"slack: no answer ({type(exc).__name__})")
        return Sent("ok", f"slack: ts {res.get('ts')}", str(res.get("ts")))

    def lookup(self, job_id: str, channel: str, marker: str) -> Found:
        mine: list[str] = []
        cursor: str | None = None
        try:
            while True:
                res = self.client.conversations_history(
                    channel=channel, include_all_metadata=True, limit=200, cursor=cursor
                )
                for m in res.get("messages") or []:
                    payload = (m.get("metadata") or {}).get("event_payload") or {}
                    if payload.get("client_marker") == marker and payload.get("job_id") == job_id:
                        mine.append(str(m.get("ts")))
                cursor = (res.get("response_metadata") or {}).get("next_cursor") or None
                if not res.get("has_more") or not cursor:
                    break
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in ("token_expired", "invalid_auth"):
                return Found("identity", f"slack history: {error}")
            return Found("unavailable", f"slack history {exc.response.status_code} {error}")
        except (OSError, ValueError) as exc:
            return Found("unavailable", f"slack history: no answer ({type(exc).__name__})")
        if not mine:
            return Found("not_found", "no message with the marker")
        if len(mine) == 1:
            return Found("confirmed", f"message {mine[0]}", mine[0])
        return Found("conflict", f"{len(mine)} messages carry the marker {marker}")
