"""Stripe's checks of single create parameters, with its error codes and messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_providers.personas.stripe_form import bad_param

_META_KEYS, _META_KEY_LEN, _META_VALUE_LEN = 50, 40, 500
_MAX_AMOUNT = 99_999_999


def metadata(raw: Any) -> dict[str, str]:
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, dict):
        raise bad_param("metadata must be a hash: metadata[key]=value", "metadata")
    if len(raw) > _META_KEYS:
        raise bad_param(f"metadata has {len(raw)} keys; at most {_META_KEYS}", "metadata")
    out = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise bad_param(f"metadata[{k}] must be a string, not a hash", f"metadata[{k}]")
        if len(k) > _META_KEY_LEN or len(v) > _META_VALUE_LEN:
            raise bad_param(
                f"metadata[{k}]: keys take {_META_KEY_LEN} characters and values "
                f"{_META_VALUE_LEN} at most",
                f"metadata[{k}]",
            )
        if v != "":  # Stripe: an empty value unsets the key
            out[k] = v
    return out


def amount(params: Mapping[str, Any], *, required: bool) -> int | None:
    raw = params.get("amount")
    if raw is None:
        if required:
            raise bad_param("Missing required param: amount.", "amount", "parameter_missing")
        return None
    if not (isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 9):
        raise bad_param(f"Invalid integer: {raw}", "amount", "parameter_invalid_integer")
    amount = int(raw)
    if not 1 <= amount <= _MAX_AMOUNT:
        raise bad_param(
            f"amount {amount} is out of range; send 1 to {_MAX_AMOUNT} in the currency's "
            f"smallest unit",
            "amount",
            "amount_too_small" if amount < 1 else "amount_too_large",
        )
    return amount


def currency(params: Mapping[str, Any]) -> None:
    raw = params.get("currency")
    if raw is None:
        raise bad_param("Missing required param: currency.", "currency", "parameter_missing")
    if not (isinstance(raw, str) and len(raw) == 3 and raw.isascii() and raw.isalpha()):
        raise bad_param(f"Invalid currency: {raw}", "currency", "parameter_invalid_string")


def flag(params: Mapping[str, Any], name: str) -> None:
    raw = params.get(name)
    if raw is not None and raw not in ("true", "false"):
        raise bad_param(f"Invalid boolean: {raw}", name, "parameter_invalid_boolean")


def choice(params: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> None:
    raw = params.get(name)
    if raw is not None and raw not in allowed:
        raise bad_param(
            f"Invalid {name}: must be one of {', '.join(allowed)}", name, "parameter_unknown"
        )
