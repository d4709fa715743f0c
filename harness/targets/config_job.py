"""What a target's jobs look like: ``[[target.steps]]`` of a multi-step job and the
body fields that hold secrets (``sensitive_fields``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.targets.config_providers import ProviderDecl
from harness.targets.config_reader import EXAMPLES, TableReader, shown

STEP_KEYS = ("name", "provider")
#: A step's name goes into point names (``before_external_call@charge``) and cell ids.
_STEP_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: A job-body field name the harness may fill (``sensitive_fields``).
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
#: Body fields the harness owns: the oracle ties arrivals to jobs through ``job_id``.
_RESERVED_FIELDS = ("job_id", "client_marker")


class JobSchema(TableReader):
    """The job's part of the schema: its steps and its sensitive fields."""

    def steps(
        self, steps: object, providers: tuple[ProviderDecl, ...]
    ) -> tuple[tuple[str, str], ...]:
        if steps is None:
            return ()
        fix = 'write each as [[target.steps]] with name = "charge" and provider = "billing"'
        if not isinstance(steps, list) or len(steps) < 2:
            raise self.fail("target.steps", f"must list two steps or more, got {shown(steps)}", fix)
        declared = [p.name for p in providers]
        out: list[tuple[str, str]] = []
        for i, entry in enumerate(steps):
            where = f"target.steps[{i}]."
            if not isinstance(entry, dict):
                raise self.fail(where[:-1], f"must be a table, got {shown(entry)}", fix)
            self.known(entry, where, STEP_KEYS, label="[[target.steps]]")
            name = self.string(entry, where, "name", example='"charge"')
            provider = self.string(entry, where, "provider", example='"billing"')
            if not _STEP_NAME.match(name) or name in (n for n, _ in out):
                raise self.fail(
                    f"{where}name",
                    f"{shown(name)} is not a new name of letters, digits, - and _",
                    "give each step its own name, like charge",
                )
            if provider not in declared:
                raise self.fail(
                    f"{where}provider",
                    f"{shown(provider)} is not a declared provider",
                    f"name one of {', '.join(declared)}",
                )
            if provider in (p for _, p in out):
                # The oracle tells steps apart by their provider (one effect per job at each).
                raise self.fail(
                    f"{where}provider",
                    f"{shown(provider)} already has a step",
                    "give each step a provider of its own",
                )
            out.append((name, provider))
        return tuple(out)

    def sensitive_fields(self, target: Mapping[str, Any]) -> tuple[str, ...]:
        """``[target] sensitive_fields``: names of job-body fields, each once."""
        value = target.get("sensitive_fields", [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.wrong("target.", "sensitive_fields", value, "a list of field names")
        for name in value:
            if not _FIELD_NAME.match(name):
                raise self.fail(
                    "target.sensitive_fields",
                    f"{shown(name)} is not a field name (letters, digits, _ and -)",
                    f"write sensitive_fields = {EXAMPLES['sensitive_fields']}",
                )
            if name in _RESERVED_FIELDS:
                raise self.fail(
                    "target.sensitive_fields",
                    f"{shown(name)} is a field the harness owns and the oracle reads",
                    "leave it out; list the fields that carry secrets or personal data",
                )
        if len(set(value)) != len(value):
            raise self.fail(
                "target.sensitive_fields",
                "names a field twice",
                "list each field once",
            )
        return tuple(value)
