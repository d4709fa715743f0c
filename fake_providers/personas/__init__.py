"""Personas: real APIs' wire formats in front of the provider kinds.

``persona_for(name)`` gives the persona a ``kind`` names (``stripe``), or None for the
three kinds themselves. Each persona module is imported only when a provider of that
persona starts, so a plain provider's start-up pays for none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from fake_providers.personas.base import Created, Handler, Host, Parsed, Persona
from harness.contract.vocabulary import DECLARED, PERSONA_KINDS

#: Persona names, each the name of its module here.
PERSONAS = tuple(PERSONA_KINDS)


def persona_kind(name: str) -> str | None:
    """The kind a persona maps onto, or None if ``name`` names no persona."""
    return PERSONA_KINDS.get(name)


def persona_for(name: str, routes: Mapping[str, Any] | None = None) -> Persona | None:
    """The persona ``name`` names (its module imported now), or None for a plain kind.
    ``http`` is the declared API of ``routes``, whose kind its table gives."""
    if name not in PERSONA_KINDS:
        return None
    if name == DECLARED:
        if routes is None:
            raise ValueError('a provider of kind "http" needs its route table (--routes)')
        from fake_providers.personas.declared import Declared

        return Declared(routes)
    module = importlib.import_module(f"fake_providers.personas.{name}")
    persona: Persona = module.PERSONA
    if persona.kind != PERSONA_KINDS[name]:
        raise ValueError(
            f"persona {name!r} has kind {persona.kind!r}; the vocabulary says "
            f"{PERSONA_KINDS[name]!r}"
        )
    return persona


__all__ = [
    "PERSONAS",
    "Created",
    "Handler",
    "Host",
    "Parsed",
    "Persona",
    "persona_for",
    "persona_kind",
]
