"""The providers' HTTP contract as OpenAPI 3.1, one description per kind.

Each provider serves its own at ``GET /openapi.json`` (no secret needed for the
description). The process tests run schemathesis against it, so it must say what the
app really answers: every status, header and body shape below is one ``app.py``,
``control.py`` or ``server.py`` sends.
"""

from __future__ import annotations

from typing import Any

from fake_providers.control import MAX_POLL_S
from fake_providers.faults import RELEASED_BY
from fake_providers.identity import HEADER as IDENTITY_HEADER
from fake_providers.identity import STATES as IDENTITY_STATES
from fake_providers.models import ACTIONS, ARRIVAL_KINDS, KINDS, OUTCOMES
from fake_providers.problems import PROBLEM_TYPE
from fake_providers.seal import SECRET_HEADER

JSON = "application/json"
Doc = dict[str, Any]


def describe(kind: str, *, hold_max_s: float = 300.0) -> Doc:
    """The OpenAPI document of a ``kind`` provider whose holds end after ``hold_max_s``."""
    if kind not in KINDS:
        raise ValueError(f"provider kind={kind!r} is unknown; use one of {', '.join(KINDS)}")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"crashpoint fake provider ({kind})",
            "version": "1",
            "description": (
                "A fake external service that records every request and side effect. "
                "/v1 is the business API a worker calls; /_control and /_oracle belong "
                f"to the harness and need the {SECRET_HEADER} header."
            ),
        },
        "paths": {
            **_business(kind),
            **_control(hold_max_s),
            **_oracle(),
            "/openapi.json": {
                "get": {
                    "operationId": "describe",
                    "summary": "This description",
                    "responses": {"200": _json("The OpenAPI document", {"type": "object"})},
                }
            },
        },
        "components": {
            "schemas": _schemas(kind, hold_max_s),
            "securitySchemes": {
                "secret": {"type": "apiKey", "in": "header", "name": SECRET_HEADER}
            },
        },
    }


# -- building blocks ------------------------------------------------------------------------


def _ref(name: str) -> Doc:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: Doc, **extra: Any) -> Doc:
    return {"description": description, "content": {JSON: {"schema": schema}}, **extra}


def _problem(description: str, **extra: Any) -> Doc:
    return {
        "description": description,
        "content": {PROBLEM_TYPE: {"schema": _ref("Problem")}},
        **extra,
    }


def _nullable(type_: str) -> Doc:
    return {"type": [type_, "null"]}


def _query(name: str, schema: Doc, description: str, *, required: bool = False) -> Doc:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": schema,
        "description": description,
    }


_REPLAYED = {
    "Idempotent-Replayed": {
        "description": "Present (true) when this is the stored response of an earlier request",
        "schema": {"type": "string", "enum": ["true"]},
    }
}

_WORKER_HEADERS = [
    {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }
    for name, description in (
        ("X-Fencing-Token", "Recorded with the arrival: the worker's lease token"),
        ("X-Worker-Id", "Recorded with the arrival: which worker sent it"),
        (
            IDENTITY_HEADER,
            "Recorded with the arrival: the identity (profile, account) it acts under",
        ),
    )
]

#: What a request under an identity the harness has expired or changed is answered.
_IDENTITY_REFUSALS = {
    "401": _problem("The session of this identity has expired; nothing was done"),
    "403": _problem(
        "The profile of this identity now acts as another; nothing was done",
        headers={
            IDENTITY_HEADER: {
                "description": "The identity the profile holds now",
                "schema": {"type": "string"},
            }
        },
    ),
}

#: What any request with a body can be refused for before the app reads it.
_BODY_ERRORS = {
    "400": _problem("Body is not a JSON object, or Content-Length is not a number"),
    "411": _problem("Chunked bodies are not supported; send Content-Length"),
    "413": _problem("Body over 1 MiB"),
}

_DENIED = {"403": _problem(f"{SECRET_HEADER} missing or wrong; the attempt is recorded")}

# -- business API ---------------------------------------------------------------------------


def _business(kind: str) -> Doc:
    injected = _problem("An injected failure (a fail_before_commit fault); nothing committed")
    if kind == "idempotent":
        return {
            "/v1/effects": {
                "post": {
                    "operationId": "createEffect",
                    "summary": "Commit an effect once per Idempotency-Key",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1},
                        },
                        *_WORKER_HEADERS,
                    ],
                    "requestBody": _write_body(["job_id"]),
                    "responses": {
                        "201": _json(
                            "Committed (or the stored response, replayed)",
                            _ref("Created"),
                            headers=_REPLAYED,
                        ),
                        **_BODY_ERRORS,
                        "400": _problem("No Idempotency-Key, or the body is not a JSON object"),
                        "409": _problem("A request with this key is still in flight"),
                        **_IDENTITY_REFUSALS,
                        "415": _problem("Content-Type is not JSON"),
                        "422": _problem(
                            "Key first used with another payload, or no string job_id "
                            "(stored and replayed under the key)",
                            headers=_REPLAYED,
                        ),
                        "5XX": injected,
                    },
                },
                "get": _lookup(
                    "lookupEffect",
                    "What became of the request with this key",
                    "idempotency_key",
                    {
                        "200": _json("The key's state", _ref("KeyState")),
                        "404": _problem("No request with this key (or it expired)"),
                    },
                ),
            }
        }
    lookup: Doc
    if kind == "plain":
        effects = {"type": "array", "items": _ref("Effect")}
        lookup = _lookup(
            "lookupSends",
            "Every effect sent with this client_marker",
            "client_marker",
            {"200": _json("Matching effects, oldest first", effects)},
        )
    else:
        lookup = {
            "operationId": "lookupSends",
            "summary": "Not available: this provider cannot look up past sends",
            "parameters": [
                _query("client_marker", {"type": "string"}, "Ignored"),
                *_WORKER_HEADERS,
            ],
            "responses": {
                "501": _problem("Always: an unknown outcome here needs review"),
                **_IDENTITY_REFUSALS,
            },
        }
    return {
        "/v1/sends": {
            "post": {
                "operationId": "send",
                "summary": "Commit an effect, every time",
                "parameters": list(_WORKER_HEADERS),
                "requestBody": _write_body(["job_id", "client_marker"]),
                "responses": {
                    "201": _json("Committed", _ref("Created")),
                    **_BODY_ERRORS,
                    **_IDENTITY_REFUSALS,
                    "415": _problem("Content-Type is not JSON"),
                    "422": _problem("No string job_id or client_marker"),
                    "5XX": injected,
                },
            },
            "get": lookup,
        }
    }


def _write_body(required: list[str]) -> Doc:
    return {
        "required": True,
        "content": {JSON: {"schema": _ref("WriteBody" if len(required) == 1 else "SendBody")}},
    }


def _lookup(operation_id: str, summary: str, param: str, responses: Doc) -> Doc:
    """A lookup by key or marker: required and non-empty, else a 400."""
    job = _query(
        "job_id",
        {"type": "string"},
        "Recorded with the lookup (default: the job of the first write with it)",
    )
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [
            _query(param, {"type": "string", "minLength": 1}, "What to look up", required=True),
            job,
            *_WORKER_HEADERS,
        ],
        "responses": {
            **responses,
            **_IDENTITY_REFUSALS,
            "400": _problem(f"No {param}"),
            "5XX": _problem("An injected lookup failure (a fail_lookup fault)"),
        },
    }


# -- control and oracle ---------------------------------------------------------------------


def _sealed(op: Doc) -> Doc:
    return {**op, "security": [{"secret": []}], "responses": {**op["responses"], **_DENIED}}


def _control(hold_max_s: float) -> Doc:
    fault_id = {
        "name": "fault_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "An id from POST /_control/faults",
    }
    unknown = _problem("No armed fault with this id")
    return {
        "/_control/health": {
            "get": _sealed(
                {
                    "operationId": "health",
                    "responses": {"200": _json("Serving", _ref("Health"))},
                }
            )
        },
        "/_control/faults": {
            "get": _sealed(
                {
                    "operationId": "listFaults",
                    "responses": {
                        "200": _json("Armed faults", {"type": "array", "items": _ref("Armed")})
                    },
                }
            ),
            "post": _sealed(
                {
                    "operationId": "armFault",
                    "requestBody": {"required": True, "content": {JSON: {"schema": _ref("Fault")}}},
                    "responses": {
                        "201": _json("Armed", _ref("FaultId")),
                        **_BODY_ERRORS,
                        "422": _problem(
                            f"Not a fault (or delay_s over the {hold_max_s:g} s hold limit)"
                        ),
                    },
                }
            ),
            "delete": _sealed(
                {
                    "operationId": "disarmFaults",
                    "responses": {
                        "200": _json("Disarmed; held requests stay held", _ref("Disarmed"))
                    },
                }
            ),
        },
        "/_control/faults/{fault_id}/held": {
            "get": _sealed(
                {
                    "operationId": "waitHeld",
                    "parameters": [
                        fault_id,
                        _query(
                            "timeout_s",
                            {"type": "number"},
                            f"Seconds to wait, clamped to [0, {MAX_POLL_S:g}]",
                        ),
                        _query(
                            "count",
                            {"type": "integer", "minimum": 1},
                            "Wait for this many held requests (answer: a list)",
                        ),
                        _query(
                            "after",
                            {"type": "integer", "minimum": 0},
                            "Only requests with a later arrival_id (the next of a times>1 hold)",
                        ),
                    ],
                    "responses": {
                        "200": _json(
                            "The held request (a list of them with count)",
                            {"oneOf": [_ref("Held"), {"type": "array", "items": _ref("Held")}]},
                        ),
                        "400": _problem("timeout_s or count is not a number"),
                        "404": unknown,
                        "408": _problem("Not held yet; poll again"),
                        "409": _problem("The fault is not a hold"),
                    },
                }
            )
        },
        "/_control/faults/{fault_id}/release": {
            "post": _sealed(
                {
                    "operationId": "release",
                    "parameters": [fault_id],
                    "requestBody": {
                        "required": False,
                        "content": {JSON: {"schema": _ref("Release")}},
                    },
                    "responses": {
                        "200": _json("Released", _ref("Released")),
                        **_BODY_ERRORS,
                        "404": unknown,
                        "409": _problem("Nothing was ever held under this fault"),
                        "422": _problem(
                            "Unknown outcome, arrival_id not an integer, or release_by "
                            "not a finite number"
                        ),
                    },
                }
            )
        },
        "/_control/settings": {
            "get": _sealed(
                {
                    "operationId": "settings",
                    "responses": {"200": _json("The provider's settings", _ref("Settings"))},
                }
            ),
            "post": _sealed(
                {
                    "operationId": "configure",
                    "requestBody": {
                        "required": False,
                        "content": {JSON: {"schema": _ref("SettingsIn")}},
                    },
                    "responses": {
                        "200": _json("The settings as they now are", _ref("Settings")),
                        **_BODY_ERRORS,
                        "409": _problem("This provider keeps no keys to configure"),
                        "422": _problem("An unknown setting, or key_ttl_s not positive"),
                    },
                }
            ),
        },
        "/_control/identities": {
            "get": _sealed(
                {
                    "operationId": "identities",
                    "responses": {"200": _json("Identities not valid now", _ref("Identities"))},
                }
            ),
            "post": _sealed(
                {
                    "operationId": "setIdentity",
                    "requestBody": {
                        "required": True,
                        "content": {JSON: {"schema": _ref("IdentityState")}},
                    },
                    "responses": {
                        "200": _json("Identities not valid now", _ref("Identities")),
                        **_BODY_ERRORS,
                        "422": _problem("Unknown state, or changed without now_acts_as"),
                    },
                }
            ),
        },
        "/_control/reset": {
            "post": _sealed(
                {
                    "operationId": "reset",
                    "responses": {
                        "200": _json("Disarmed all, dropped every hold", _ref("Released"))
                    },
                }
            )
        },
        "/_control/wipe": {
            "post": _sealed(
                {
                    "operationId": "wipe",
                    "description": "Back to the state of a fresh start: every arrival, "
                    "effect, key, fault, hold and identity forgotten, the settings it "
                    "started with, ids from 1 again. Requests sent before it are dropped "
                    "unrecorded. A provider started with --new-port-on-wipe listens on a "
                    "new port after it (the answer's url).",
                    "responses": {
                        "200": _json("As fresh as a new start", _ref("Wiped")),
                        "503": _problem("Requests from before are still being handled"),
                    },
                }
            )
        },
    }


def _oracle() -> Doc:
    return {
        "/_oracle/arrivals": {
            "get": _sealed(
                {
                    "operationId": "arrivals",
                    "parameters": [
                        _query(
                            "after",
                            {"type": "integer", "minimum": 0},
                            "Only arrivals with a greater id",
                        )
                    ],
                    "responses": {
                        "200": _json(
                            "Arrivals in order", {"type": "array", "items": _ref("Arrival")}
                        ),
                        "400": _problem("after is not a non-negative integer"),
                    },
                }
            )
        },
        "/_oracle/effects": {
            "get": _sealed(
                {
                    "operationId": "effects",
                    "responses": {
                        "200": _json(
                            "Effects in commit order", {"type": "array", "items": _ref("Effect")}
                        )
                    },
                }
            )
        },
        "/_oracle/releases": {
            "get": _sealed(
                {
                    "operationId": "releases",
                    "summary": "How and when each held request was let go, in order",
                    "responses": {
                        "200": _json(
                            "Releases in order", {"type": "array", "items": _ref("ReleaseRecord")}
                        )
                    },
                }
            )
        },
        "/_oracle/tools": {
            "get": _sealed(
                {
                    "operationId": "tools",
                    "summary": "The MCP tools served at /mcp (none unless --transport mcp)",
                    "responses": {
                        "200": _json(
                            "Tools with the annotations they declare",
                            {"type": "array", "items": {"type": "object"}},
                        )
                    },
                }
            )
        },
    }


# -- schemas --------------------------------------------------------------------------------


def _object(properties: Doc, *, required: list[str] | None = None) -> Doc:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


def _schemas(kind: str, hold_max_s: float) -> Doc:
    text, opt_text = {"type": "string"}, _nullable("string")
    integer, opt_integer = {"type": "integer"}, _nullable("integer")
    number = {"type": "number"}
    # An smtp provider's SMTP port, by name: {"smtp": "smtp://127.0.0.1:2525"}.
    listeners = {"type": "object", "additionalProperties": text}
    held = _object(
        {
            "fault_id": text,
            "action": {"type": "string", "enum": list(ACTIONS)},
            "arrival_id": integer,
            "job_id": opt_text,
            "idempotency_key": opt_text,
            "client_marker": opt_text,
            "committed": {"type": "boolean"},
            "effect_id": opt_integer,
            "t_mono": number,
            # When the provider lets it go by itself (monotonic; null: no deadline).
            "release_by": _nullable("number"),
            # Null while held; "deadline" when that deadline came before the wait did (or
            # whoever let it go while the answer was being written).
            "released_by": {"type": ["string", "null"], "enum": [*RELEASED_BY, None]},
        }
    )
    fault = _object(
        {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "job": opt_text,
            "key": opt_text,
            "marker": opt_text,
            "times": {"type": "integer", "minimum": 1},
            "status": {
                "type": "integer",
                "anyOf": [{"const": 429}, {"minimum": 500, "maximum": 599}],
            },
            "delay_s": {"type": "number", "minimum": 0, "maximum": hold_max_s},
            # Hold faults only: the provider lets a held request go this long after the
            # hold, with release_outcome, even if no release call comes (null: none).
            "release_after_s": {
                "type": ["number", "null"],
                "minimum": 0,
                "maximum": hold_max_s,
            },
            "release_outcome": {"type": "string", "enum": list(OUTCOMES)},
        },
        required=["action"],
    )
    return {
        "Problem": _object(
            {
                "type": text,
                "title": text,
                "status": integer,
                "detail": text,
                "instance": text,
            },
            required=["type", "title", "status", "detail"],
        ),
        "WriteBody": _object({"job_id": text}),
        "SendBody": _object({"job_id": text, "client_marker": text}),
        "Created": _object(
            {
                "id": integer,
                "object": {
                    "type": "string",
                    "enum": ["effect" if kind == "idempotent" else "send"],
                },
                "job_id": text,
                "idempotency_key": opt_text,
                "client_marker": opt_text,
                "fingerprint": text,
                "created": number,
                "external_id": text,
            }
        ),
        "KeyState": _object(
            {
                "state": {"type": "string", "enum": ["in_flight", "completed"]},
                "response": {
                    "oneOf": [
                        {"type": "null"},
                        _object({"status": integer, "body": {"type": "object"}}),
                    ]
                },
            }
        ),
        "Effect": _object(
            {
                "id": integer,
                "provider": text,
                "job_id": opt_text,
                "idempotency_key": opt_text,
                "client_marker": opt_text,
                "fingerprint": text,
                "arrival_id": integer,
                "t_mono": number,
                "t_wall": number,
                "external_id": text,
            }
        ),
        "Arrival": _object(
            {
                "id": integer,
                "t_mono": number,
                "t_wall": number,
                "provider": text,
                "kind": {"type": "string", "enum": list(ARRIVAL_KINDS)},
                "method": text,
                "path": text,
                "job_id": opt_text,
                "idempotency_key": opt_text,
                "client_marker": opt_text,
                "fingerprint": opt_text,
                "fencing_token": opt_text,
                "worker_id": opt_text,
                "peer_pid": opt_integer,
                "status": opt_integer,
                "committed": {"type": "boolean"},
                "replayed": {"type": "boolean"},
                "effect_id": opt_integer,
                "fault": opt_text,
                "identity": opt_text,
            }
        ),
        "IdentityState": {
            **_object(
                {
                    "identity": {"type": "string", "minLength": 1},
                    "state": {"type": "string", "enum": list(IDENTITY_STATES)},
                    # null: not given; required (and different) when state is "changed".
                    "now_acts_as": {"type": ["string", "null"], "minLength": 1},
                },
                required=["identity", "state"],
            ),
            "additionalProperties": False,
        },
        "Identities": {
            "type": "object",
            "additionalProperties": _object(
                {
                    "state": {"type": "string", "enum": ["expired", "changed"]},
                    "now_acts_as": opt_text,
                }
            ),
        },
        "Fault": fault,
        "FaultId": _object({"fault_id": text}),
        "Held": held,
        "Armed": _object(
            {
                "id": text,
                "fault": fault,
                "remaining": integer,
                "hits": integer,
                "held": {"type": "array", "items": held},
            }
        ),
        "Release": _object(
            {
                "outcome": {"type": "string", "enum": list(OUTCOMES)},
                "arrival_id": opt_integer,
                # Not now but at this time on the provider's monotonic clock (as t_mono),
                # if earlier than the deadline the hold has.
                "release_by": _nullable("number"),
            },
            required=[],
        ),
        "Released": _object(
            {
                "released": integer,
                # With release_by: how many holds now have that deadline.
                "scheduled": integer,
                # Matching holds let go already (by their deadline, or an earlier call).
                "earlier": {
                    "type": "array",
                    "items": _object(
                        {
                            "arrival_id": integer,
                            "outcome": text,
                            "released_by": text,
                            "t_mono": number,
                        }
                    ),
                },
            },
            required=["released"],
        ),
        "ReleaseRecord": _object(
            {
                "id": integer,
                "provider": text,
                "arrival_id": integer,
                "fault_id": text,
                "action": text,
                "job_id": opt_text,
                "outcome": {"type": "string", "enum": ["commit", "drop"]},
                "released_by": {"type": "string", "enum": list(RELEASED_BY)},
                "t_mono": number,
                "t_wall": number,
            }
        ),
        "Wiped": _object(
            {
                "url": {"type": ["string", "null"]},
                "fenced": integer,
                "dropped": integer,
                "listeners": listeners,
            },
            required=["url", "fenced", "dropped"],
        ),
        "Settings": _object({"key_ttl_s": _nullable("number")}),
        "SettingsIn": {
            "type": "object",
            "properties": {"key_ttl_s": {"type": "number", "exclusiveMinimum": 0}},
            "additionalProperties": False,
        },
        "Disarmed": _object({"disarmed": {"type": "boolean", "const": True}}),
        "Health": _object(
            {
                "ok": {"type": "boolean", "const": True},
                "kind": {"type": "string", "enum": [kind]},
                "name": text,
                "listeners": listeners,
            },
            required=["ok", "kind", "name"],
        ),
    }
