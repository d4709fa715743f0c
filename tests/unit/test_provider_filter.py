"""``--provider`` by the API a provider speaks: ``stripe`` names the providers declared
with ``kind = "stripe"``."""

from __future__ import annotations

import pytest

from harness.commands.target import by_persona
from harness.contract.errors import ConfigError
from harness.plan import select_cells
from harness.targets.config import ProviderDecl

DECLARED = (
    ProviderDecl("billing", "idempotent", persona="stripe"),
    ProviderDecl("refunds", "idempotent", persona="stripe"),
    ProviderDecl("chat", "plain", persona="slack"),
    ProviderDecl("ledger", "plain"),
)


def test_a_persona_names_every_provider_that_speaks_it_and_the_rest_stay() -> None:
    assert by_persona(["stripe"], DECLARED) == ("billing", "refunds")
    assert by_persona(["slack", "plain", "billing"], DECLARED) == ("chat", "plain", "billing")
    assert by_persona([], DECLARED) == ()


def test_the_cells_are_the_persona_providers_and_an_unspoken_persona_is_an_error() -> None:
    declared = [(p.name, p.kind) for p in DECLARED]
    cells = select_cells(
        scenarios=["crash_after_external_success"],
        providers=by_persona(["stripe"], DECLARED),
        declared=declared,
    )
    assert {c.provider_name for c in cells} == {"billing", "refunds"}
    with pytest.raises(ConfigError, match="--provider 'github' is neither the name nor the kind"):
        select_cells(providers=by_persona(["github"], DECLARED), declared=declared)
