"""``[[providers]]``: the fake providers a target's worker talks to, by name and kind
(a persona speaks a real API's wire format over its kind)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_providers.personas.declared import declared_kind
from fake_providers.tools import HINTS as TOOL_HINTS
from fake_providers.tools import TRANSPORTS
from harness.contract.env import provider_env_name, provider_env_var
from harness.contract.vocabulary import PERSONA_KINDS, PROVIDER_KINDS
from harness.targets.config_reader import ENV_NAME, shown, toml_type
from harness.targets.config_routes import RouteSchema
from harness.targets.personas import sdk_base_url

PROVIDER_KEYS = ("name", "kind", "transport", "tool_hints", "env", "routes")
#: What ``kind`` may name: a kind, or a persona over one.
KIND_NAMES = (*PROVIDER_KINDS, *PERSONA_KINDS)


@dataclass(frozen=True)
class ProviderDecl:
    name: str
    #: The provider's kind (idempotent, plain, unqueryable): what every decision by kind
    #: (the oracle's, the scenarios', fault arming) sees, a persona's included.
    kind: str
    transport: str = "http"
    #: The write tool's annotations where they differ from the kind's honest ones (mcp).
    tool_hints: tuple[tuple[str, bool], ...] = ()
    #: The real API the provider speaks over its kind (``kind = "stripe"`` in the file);
    #: None: the kind's own API.
    persona: str | None = None
    #: A further variable the worker gets the SDK's base URL in (``STRIPE_API_BASE``).
    env: str | None = None
    #: A declared API's route table (``kind = "http"``) as JSON text; None for any other.
    routes: str | None = None

    @property
    def route_table(self) -> dict[str, Any] | None:
        return json.loads(self.routes) if self.routes else None

    @property
    def wire(self) -> str:
        """What ``kind`` says in the file: the persona, else the kind."""
        return self.persona or self.kind

    def start_options(self) -> dict[str, Any]:
        """What ``start_provider`` needs besides kind and name to start this one."""
        options: dict[str, Any] = {"persona": self.persona} if self.persona else {}
        if self.routes:
            options["routes"] = self.route_table
        if self.transport != "http":
            options |= {"transport": self.transport, "tool_hints": dict(self.tool_hints) or None}
        return options

    def env_alias(self, url: str) -> dict[str, str]:
        """``{env: the SDK's base URL}`` for a provider at ``url``; empty without ``env``."""
        return {self.env: sdk_base_url(self.persona, url)} if self.env else {}


class ProviderSchema(RouteSchema):
    """The ``[[providers]]`` part of the schema."""

    def providers(self, providers: object) -> tuple[ProviderDecl, ...]:
        if providers is None or providers == []:
            raise self.fail(
                "providers",
                "declares no provider",
                'add a [[providers]] table with name = "billing" and kind = "idempotent"',
            )
        if not isinstance(providers, list):
            raise self.fail(
                "providers",
                f"must be an array of tables, got {shown(providers)}",
                "write each one as a [[providers]] table",
            )
        decls: list[ProviderDecl] = []
        by_var: dict[str, str] = {}
        for i, entry in enumerate(providers):
            where = f"providers[{i}]."
            if not isinstance(entry, dict):
                raise self.fail(
                    where[:-1], f"must be a table, got {shown(entry)}", "write it as [[providers]]"
                )
            self.known(entry, where, PROVIDER_KEYS, label="[[providers]]")
            name = self.string(entry, where, "name", example='"billing"')
            kind = self._provider_kind(entry, where)
            self._new_provider_name(name, where, decls, by_var)
            transport, persona = self._provider_transport(entry, where, kind)
            alias = self.url_env(entry, where, decls)
            routes = self.routes(entry, where, kind)
            decls.append(
                ProviderDecl(
                    name,
                    declared_kind(routes) if routes else PERSONA_KINDS.get(kind, kind),
                    transport,
                    self.tool_hints(entry, where, transport),
                    persona=persona,
                    env=alias,
                    routes=json.dumps(routes, sort_keys=True) if routes else None,
                )
            )
        return tuple(decls)

    def _provider_kind(self, entry: Mapping[str, Any], where: str) -> str:
        kind = self.string(entry, where, "kind")
        if kind not in KIND_NAMES:
            near = difflib.get_close_matches(kind.lower(), KIND_NAMES, n=1, cutoff=0.6)
            raise self.fail(
                f"{where}kind",
                f"is {shown(kind)}" + (f" (did you mean {shown(near[0])}?)" if near else ""),
                f"use one of {', '.join(KIND_NAMES)}",
            )
        return kind

    def _new_provider_name(
        self, name: str, where: str, decls: list[ProviderDecl], by_var: dict[str, str]
    ) -> None:
        """``name`` gives the worker a URL variable of its own; ``by_var`` records it."""
        if not provider_env_name(name):
            raise self.fail(
                f"{where}name",
                f"{shown(name)} has no letter or digit",
                "the worker reads CRASHPOINT_PROVIDER_<NAME>_URL; name it like billing",
            )
        var = provider_env_var(name)
        if name in (d.name for d in decls):
            raise self.fail(
                f"{where}name",
                f"{shown(name)} is declared twice",
                "give each provider its own name",
            )
        if var in by_var:
            raise self.fail(
                f"{where}name",
                f"{shown(name)} and {shown(by_var[var])} both give the worker {var}",
                "rename one so the worker can tell them apart",
            )
        by_var[var] = name

    def _provider_transport(
        self, entry: Mapping[str, Any], where: str, kind: str
    ) -> tuple[str, str | None]:
        """The provider's transport, and its persona (a persona speaks HTTP only)."""
        transport = entry.get("transport", "http")
        if transport not in TRANSPORTS:
            raise self.fail(
                f"{where}transport",
                f"is {shown(transport)}",
                f"use one of {', '.join(shown(t) for t in TRANSPORTS)} (default http)",
            )
        persona = kind if kind in PERSONA_KINDS else None
        if persona is not None and transport != "http":
            raise self.fail(
                f"{where}transport",
                f"is {shown(transport)} on the {persona} persona, which speaks HTTP only",
                f'drop transport, or use kind = "{PERSONA_KINDS[persona]}" for an MCP tool',
            )
        return transport, persona

    def url_env(
        self, entry: Mapping[str, Any], where: str, decls: list[ProviderDecl]
    ) -> str | None:
        """``env``: a variable of the worker's own that gets the SDK's base URL too."""
        if "env" not in entry:
            return None
        alias = self.string(entry, where, "env", example='"STRIPE_API_BASE"')
        if not ENV_NAME.fullmatch(alias):
            raise self.fail(
                f"{where}env",
                f"{shown(alias)} is not an environment variable name",
                'use letters, digits and _ (not first a digit), like env = "STRIPE_API_BASE"',
            )
        if alias.startswith("CRASHPOINT_"):
            raise self.fail(
                f"{where}env",
                f"{shown(alias)} is a name the harness sets itself",
                "name the variable your SDK or worker reads, like STRIPE_API_BASE",
            )
        if any(d.env == alias for d in decls):
            raise self.fail(
                f"{where}env",
                f"{shown(alias)} is given to two providers",
                "give each provider's URL its own variable",
            )
        return alias

    def tool_hints(
        self, entry: Mapping[str, Any], where: str, transport: str
    ) -> tuple[tuple[str, bool], ...]:
        if "tool_hints" not in entry:
            return ()
        hints = entry["tool_hints"]
        key = f"{where}tool_hints"
        if transport != "mcp":
            raise self.fail(
                key,
                'is set on a provider without transport = "mcp"',
                'only tools declare hints: add transport = "mcp", or drop tool_hints',
            )
        if not isinstance(hints, dict):
            raise self.wrong(
                where, "tool_hints", hints, "a table", example="{ idempotentHint = true }"
            )
        out = []
        for name, value in hints.items():
            if name not in TOOL_HINTS:
                raise self.fail(
                    f"{key}.{name}", "is not an MCP tool annotation", f"use {', '.join(TOOL_HINTS)}"
                )
            if not isinstance(value, bool):
                raise self.fail(
                    f"{key}.{name}",
                    f"must be true or false, got {shown(value)} ({toml_type(value)})",
                    f"write {name} = true",
                )
            out.append((name, value))
        return tuple(out)
