"""schemathesis against real providers: no 5xx, every answer as the OpenAPI says.

A bounded, seeded run per provider kind (the business API, the oracle and every control
call but arming a fault, which would make later cases fail on purpose), and one run of
the control API on a provider that sees no business traffic, so the faults the fuzzer
arms there act on nothing. The provider must still serve afterwards and log no
traceback. The schemathesis CLI runs in a subprocess: all its phases and checks, as a
user of the published description would run them.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

#: Fixed, so a finding reproduces (schemathesis prints the seed and a curl line for it).
SEED = 20260517
#: Generated cases per operation, besides the coverage phase's boundary cases: bounded
#: by the test run's Hypothesis profile (tests/conftest.py), as every fuzzer here is. The
#: "ci" default keeps the module near 30 s of CPU on two cores; `nox -s deep` runs
#: schemathesis' own default of 100 and more.
EXAMPLES = {"deep": 200}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 25)

#: Every check schemathesis has, bar those that need the stateful phase (off: a fuzzed
#: hold would park requests for ``hold_max_s``) or several identities, and response time.
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
]

#: The control call that changes what later business requests get, and those that
#: clear every armed fault.
ARMING = "armFault"
CLEARING = ["disarmFaults", "reset"]
#: The call that forgets everything the runs above look for afterwards: fuzzed alone.
WIPING = "wipe"

#: A client without the secret; an empty TLS context skips loading the CA bundle.
# Module-wide, so no kept-alive sockets: the providers it talks to are killed and gone
# long before the module's end, and a pooled socket would be left to the collector.
HTTP = httpx.Client(
    timeout=30.0,
    verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
    limits=httpx.Limits(max_keepalive_connections=0),
)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


@pytest.fixture
def started() -> Iterator[list[ProviderProcess]]:
    providers: list[ProviderProcess] = []
    yield providers
    for p in providers:
        p.close()


def _config(p: ProviderProcess, *, operations: str) -> str:
    lines = [
        f"seed = {SEED}",
        "workers = 1",
        # Hypothesis times its own data generation; on a loaded machine that is noise.
        'suppress-health-check = ["too_slow"]',
        # A long poll waits at most 10 s; nothing else should take a second.
        "request-timeout = 15.0",
        "[headers]",
        f'X-Crashpoint-Secret = "{p.secret}"',
        "[generation]",
        f"max-examples = {EXAMPLES}",
        'database = "none"',
        "[phases.stateful]",
        "enabled = false",
        "[checks]",
        *(f"{c}.enabled = true" for c in CHECKS),
        # Schema-valid requests may still be refused for what came before them: a key
        # first used with another payload (422) or still in flight (409), a fault id
        # nobody armed (404).
        'positive_data_acceptance.expected-statuses = ["2XX", "404", "409", "422"]',
        # schemathesis leaves out the operation serving the schema it loaded; say so, so
        # the count of tested operations below is exact.
        "[[operations]]",
        'include-operation-id = "describe"',
        "enabled = false",
        operations,
    ]
    if p.kind == "unqueryable":
        # The lookup is a 501 by design: the one documented 5xx that is not an error.
        lines += [
            "[[operations]]",
            'include-operation-id = "lookupSends"',
            'checks.not_a_server_error.expected-statuses = ["2XX", "3XX", "4XX", "501"]',
            'checks.positive_data_acceptance.expected-statuses = ["501"]',
        ]
    return "\n".join(lines) + "\n"


def _pin_fault(p: ProviderProcess) -> str:
    """Arm a fault that never acts and route the fault-id operations to it.

    Fault ids are f-1, f-2, ...; a generated id almost never names one, and every case
    would stop at "no such fault". A lookup fault never holds, so the long poll answers
    at once and nothing ever waits on a hold.
    """
    fault_id = p.client.arm(Fault("fail_lookup", job=f"pinned-{uuid.uuid4()}"))
    return "\n".join(
        [
            "[[operations]]",
            'include-path-regex = "^/_control/faults/"',
            f'parameters = {{ "path.fault_id" = "{fault_id}" }}',
        ]
    )


def _fuzz(p: ProviderProcess, tmp_path: Path, *, operations: str, expect_ops: int) -> str:
    """Run schemathesis on ``p``; fail on any finding; return its report."""
    cwd = tmp_path / f"st-{p.name}"
    cwd.mkdir()
    config = cwd / "schemathesis.toml"
    config.write_text(_config(p, operations=operations))
    config.chmod(0o600)  # it holds the provider's secret
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "--no-color",
            "run",
            f"{p.url}/openapi.json",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    summary = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"schemathesis found problems in the {p.kind} provider:\n{summary}"
    tested = re.search(r"Tested:\s+(\d+)", run.stdout)
    assert tested is not None, summary
    assert int(tested.group(1)) == expect_ops, summary
    assert p.alive(), f"the {p.kind} provider died under the fuzzer; see {p.log_path}"
    assert "Traceback" not in p.log_path.read_text(), p.log_path.read_text()[-2000:]
    assert p.client.health()["kind"] == p.kind
    return run.stdout


def _description(p: ProviderProcess) -> dict[str, Any]:
    doc: dict[str, Any] = HTTP.get(f"{p.url}/openapi.json").json()
    return doc


def _operations(p: ProviderProcess) -> list[str]:
    doc = _description(p)
    return [op["operationId"] for item in doc["paths"].values() for op in item.values()]


@pytest.mark.parametrize("kind", ["idempotent", "plain", "unqueryable"])
def test_business_and_oracle_api_survive_the_fuzzer(
    kind: str, tmp_path: Path, started: list[ProviderProcess]
) -> None:
    p = start_provider(kind, state_path=tmp_path / f"{kind}.db", hold_max_s=30.0)
    started.append(p)
    ops = _operations(p)
    assert ARMING in ops
    assert WIPING in ops
    skipped = json.dumps([ARMING, WIPING])
    operations = f"[[operations]]\ninclude-operation-id = {skipped}\nenabled = false"
    # Not describe, arming or wiping.
    _fuzz(p, tmp_path, operations=operations, expect_ops=len(ops) - 3)
    kinds = {a.kind for a in p.client.arrivals()}
    # The fuzzer wrote, and its unauthenticated probes (ignored_auth) hit the seal.
    assert {"write", "control_denied"} <= kinds, kinds
    assert not [e for e in p.client.effects() if e.provider != kind]


def test_control_api_survives_the_fuzzer(tmp_path: Path, started: list[ProviderProcess]) -> None:
    p = start_provider("idempotent", state_path=tmp_path / "control.db", hold_max_s=30.0)
    started.append(p)
    # Disarming, resetting and wiping would remove the pinned fault; the runs above and
    # below fuzz them.
    skipped = ["createEffect", "lookupEffect", *CLEARING, WIPING]
    operations = "\n".join(
        [
            "[[operations]]",
            f"include-operation-id = {json.dumps(skipped)}",
            "enabled = false",
            _pin_fault(p),
        ]
    )
    tested = [op for op in _operations(p) if op not in skipped]
    report = _fuzz(p, tmp_path, operations=operations, expect_ops=len(tested) - 1)  # no describe
    # The pin worked: the fault-id operations got past "no such fault".
    assert "Missing test data" not in report, report
    assert p.client.effects() == []


def test_the_wipe_survives_the_fuzzer(tmp_path: Path, started: list[ProviderProcess]) -> None:
    p = start_provider("idempotent", state_path=tmp_path / "wipe.db", hold_max_s=30.0)
    started.append(p)
    r = HTTP.post(f"{p.url}/v1/effects", json={"job_id": "j-1"}, headers={"Idempotency-Key": "k-1"})
    assert r.status_code == 201, r.text
    others = [op for op in _operations(p) if op not in (WIPING, "describe")]
    operations = f"[[operations]]\ninclude-operation-id = {json.dumps(others)}\nenabled = false"
    _fuzz(p, tmp_path, operations=operations, expect_ops=1)
    assert p.client.effects() == []  # wiped, and still serving (checked by _fuzz)


def test_the_description_is_served_without_the_secret(
    tmp_path: Path, started: list[ProviderProcess]
) -> None:
    p = start_provider("plain", state_path=tmp_path / "d.db")
    started.append(p)
    doc = _description(p)  # a plain client, no secret header
    assert doc["openapi"].startswith("3.1")
    assert "/v1/sends" in doc["paths"]
    assert doc["paths"]["/_oracle/arrivals"]["get"]["security"] == [{"secret": []}]
    assert p.client.arrivals() == []  # reading the description is no arrival
