"""Stripe's PaymentIntents, Refunds and Customers: what a create takes and what it makes.

A create's parameters are checked here before the provider sees the write, so a
refused request reserves no key: Stripe saves no idempotent result for a request that
failed validation. Checks only read what never changes once made (a PaymentIntent's
amount and status, whether a customer exists), so a replay under a key is never refused
by a later state. Every id and time in an object is derived from its effect row, so the
answer sent and the object kept for retrieves are the same bytes however often built.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_providers.personas import stripe_params as check
from fake_providers.personas.base import Parsed
from fake_providers.personas.stripe_form import bad_param
from fake_providers.store import Store

_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Resource:
    name: str  # Stripe's ``object`` value, and Parsed.resource
    path: str  # /v1/payment_intents
    prefix: str  # pi
    params: frozenset[str]  # what a create takes
    list_filters: frozenset[str]  # what a list narrows by
    search_fields: frozenset[str] | None  # None: Stripe has no search for it


PAYMENT_INTENT = Resource(
    "payment_intent",
    "/v1/payment_intents",
    "pi",
    _names(
        "amount currency confirm customer description metadata payment_method "
        "payment_method_types automatic_payment_methods capture_method confirmation_method "
        "receipt_email statement_descriptor statement_descriptor_suffix setup_future_usage "
        "return_url off_session shipping transfer_group"
    ),
    frozenset({"customer"}),
    frozenset({"amount", "currency", "customer", "status"}),
)
REFUND = Resource(
    "refund",
    "/v1/refunds",
    "re",
    _names("payment_intent charge amount reason metadata"),
    frozenset({"payment_intent", "charge"}),
    None,
)
CUSTOMER = Resource(
    "customer",
    "/v1/customers",
    "cus",
    _names("email name description phone metadata address shipping"),
    frozenset({"email"}),
    frozenset({"email", "name", "phone"}),
)
RESOURCES = (PAYMENT_INTENT, REFUND, CUSTOMER)


def parse_create(res: Resource, params: dict[str, Any], key: str | None, store: Store) -> Parsed:
    """A create's parameters checked as Stripe checks them; raises a StripeProblem."""
    for name in params:
        if name == "expand":
            raise bad_param(
                "expand is not supported by crashpoint's Stripe persona; fetch the "
                "related object with its own retrieve",
                "expand",
            )
        if name not in res.params:
            raise bad_param(f"Received unknown parameter: {name}", name)
    meta = check.metadata(params.get("metadata"))
    job_id = meta.get("job_id")
    if not job_id:
        raise bad_param(
            "metadata[job_id] is missing; crashpoint ties every write to its job by it "
            "(send the job's id, e.g. metadata[job_id]=j-0001)",
            "metadata[job_id]",
            "parameter_missing",
        )
    extra: dict[str, Any] = {}
    if res is PAYMENT_INTENT:
        check.amount(params, required=True)
        check.currency(params)
        check.flag(params, "confirm")
        check.choice(params, "capture_method", ("automatic", "automatic_async", "manual"))
        if params.get("customer"):
            _existing(store, CUSTOMER, str(params["customer"]), "customer")
    elif res is REFUND:
        extra["payment_intent"] = _refunded_intent(params, store)
        amount = check.amount(params, required=False)
        if amount is not None and amount > int(extra["payment_intent"]["amount"]):
            raise bad_param(
                f"Refund amount ({amount}) is greater than the PaymentIntent's amount "
                f"({extra['payment_intent']['amount']})",
                "amount",
                "amount_too_large",
            )
        check.choice(params, "reason", ("duplicate", "fraudulent", "requested_by_customer"))
    return Parsed(payload=params, job_id=job_id, key=key, resource=res.name, extra=extra)


def build(res: Resource, parsed: Parsed, effect: Mapping[str, Any]) -> dict[str, Any]:
    """The object a committed create made, in Stripe's shape."""
    p = parsed.payload
    seed = f"{effect['provider']}:{effect['id']}:{effect['t_wall']}"
    obj_id = f"{res.prefix}_{_token(seed, 24)}"
    common: dict[str, Any] = {
        "id": obj_id,
        "object": res.name,
        "created": int(effect["t_wall"]),
        "livemode": False,
        "metadata": check.metadata(p.get("metadata")),
    }
    if res is PAYMENT_INTENT:
        return common | _payment_intent(obj_id, p, seed)
    if res is REFUND:
        intent = parsed.extra["payment_intent"]
        amount = int(p["amount"]) if p.get("amount") else int(intent["amount"])
        return common | {
            "amount": amount,
            "balance_transaction": f"txn_{_token(seed + ':txn', 24)}",
            "charge": intent["latest_charge"],
            "currency": intent["currency"],
            "destination_details": None,
            "payment_intent": intent["id"],
            "reason": p.get("reason") or None,
            "receipt_number": None,
            "source_transfer_reversal": None,
            "status": "succeeded",
            "transfer_reversal": None,
        }
    return common | {
        "address": None,
        "balance": 0,
        "currency": None,
        "default_source": None,
        "delinquent": False,
        "description": p.get("description") or None,
        "discount": None,
        "email": p.get("email") or None,
        "invoice_prefix": _token(seed + ":inv", 8).upper(),
        "invoice_settings": {
            "custom_fields": None,
            "default_payment_method": None,
            "footer": None,
            "rendering_options": None,
        },
        "name": p.get("name") or None,
        "next_invoice_sequence": 1,
        "phone": p.get("phone") or None,
        "preferred_locales": [],
        "shipping": None,
        "tax_exempt": "none",
        "test_clock": None,
    }


def _payment_intent(obj_id: str, p: Mapping[str, Any], seed: str) -> dict[str, Any]:
    amount = int(p["amount"])
    capture = p.get("capture_method") or "automatic_async"
    if p.get("confirm") == "true":
        status = "requires_capture" if capture == "manual" else "succeeded"
    else:
        status = "requires_confirmation" if p.get("payment_method") else "requires_payment_method"
    charged = status in ("succeeded", "requires_capture")
    apm = p.get("automatic_payment_methods")
    return {
        "amount": amount,
        "amount_capturable": amount if status == "requires_capture" else 0,
        "amount_details": {"tip": {}},
        "amount_received": amount if status == "succeeded" else 0,
        "application": None,
        "application_fee_amount": None,
        "automatic_payment_methods": (
            {"enabled": apm.get("enabled") == "true"} if isinstance(apm, dict) else None
        ),
        "canceled_at": None,
        "cancellation_reason": None,
        "capture_method": capture,
        "client_secret": f"{obj_id}_secret_{_token(seed + ':secret', 25)}",
        "confirmation_method": p.get("confirmation_method") or "automatic",
        "currency": str(p["currency"]).lower(),
        "customer": p.get("customer") or None,
        "description": p.get("description") or None,
        "last_payment_error": None,
        "latest_charge": f"ch_{_token(seed + ':charge', 24)}" if charged else None,
        "next_action": None,
        "on_behalf_of": None,
        "payment_method": p.get("payment_method") or None,
        "payment_method_options": {},
        "payment_method_types": p.get("payment_method_types") or ["card"],
        "processing": None,
        "receipt_email": p.get("receipt_email") or None,
        "review": None,
        "setup_future_usage": p.get("setup_future_usage") or None,
        "shipping": None,
        "source": None,
        "statement_descriptor": p.get("statement_descriptor") or None,
        "statement_descriptor_suffix": p.get("statement_descriptor_suffix") or None,
        "status": status,
        "transfer_data": None,
        "transfer_group": p.get("transfer_group") or None,
    }


def stored(store: Store, res: Resource, object_id: str) -> dict[str, Any] | None:
    """The object ``object_id`` of ``res`` with the job it belongs to, or None."""
    rows = store.objects(resource=res.name, object_id=object_id)
    return rows[0] if rows else None


def _existing(store: Store, res: Resource, object_id: str, param: str) -> dict[str, Any]:
    row = stored(store, res, object_id)
    if row is None:
        raise bad_param(f"No such {res.name}: '{object_id}'", param, "resource_missing")
    obj: dict[str, Any] = json.loads(row["body"])
    return obj


def _refunded_intent(params: Mapping[str, Any], store: Store) -> dict[str, Any]:
    """The PaymentIntent a refund is for, by ``payment_intent`` or its ``charge``."""
    if params.get("payment_intent"):
        intent = _existing(store, PAYMENT_INTENT, str(params["payment_intent"]), "payment_intent")
    elif params.get("charge"):
        charge = str(params["charge"])
        found = [
            json.loads(r["body"])
            for r in store.objects(resource=PAYMENT_INTENT.name)
            if json.loads(r["body"]).get("latest_charge") == charge
        ]
        if not found:
            raise bad_param(f"No such charge: '{charge}'", "charge", "resource_missing")
        intent = found[0]
    else:
        raise bad_param(
            "One of the following params should be provided for this request: "
            "payment_intent or charge.",
            "payment_intent",
            "parameter_missing",
        )
    if intent["latest_charge"] is None or intent["status"] != "succeeded":
        raise bad_param(
            f"PaymentIntent {intent['id']} has status {intent['status']!r} and no "
            f"successful charge to refund; create it with confirm=true",
            "payment_intent",
            "charge_not_refundable",
        )
    return intent


def _token(seed: str, length: int) -> str:
    """``length`` alphanumerics derived from ``seed``: a Stripe-looking id, never drawn."""
    n = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    out = []
    for _ in range(length):
        n, r = divmod(n, len(_ALNUM))
        out.append(_ALNUM[r])
    return "".join(out)
