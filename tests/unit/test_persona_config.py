"""Personas in crashpoint.toml: ``kind = "stripe"`` is read as the idempotent kind that
speaks Stripe's API, a misspelt kind is one line with a guess, ``init --provider``
writes the SDK's base-URL line, and check-config names the persona calls it saw."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.commands.check_config import static_lines
from harness.commands.check_findings import judge
from harness.commands.check_lines import FAIL, OK
from harness.commands.check_watch import JOB, Seen
from harness.commands.init import render
from harness.commands.init_plan import plan
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import DECLARED, PERSONA_KINDS
from harness.targets.command import CommandAdapter
from harness.targets.config import CommandConfig, ProviderDecl, config_from_data, load_config
from harness.targets.personas import GUIDES, sdk_base_url
from harness.targets.wiretap import Tapped

TARGET = {
    "name": "w",
    "command": ["python3", "worker.py"],
    "enqueue": ["python3", "enqueue.py", "{job_id}", "{payload_file}"],
}


def parse(tmp_path: Path, *providers: dict[str, Any]) -> CommandConfig:
    data = {"target": TARGET, "providers": list(providers)}
    return config_from_data(data, path=tmp_path / "crashpoint.toml")


# A declared API (http) needs its routes, and its kind follows them: test_config_routes.
@pytest.mark.parametrize("persona", sorted(set(PERSONA_KINDS) - {DECLARED}))
def test_a_persona_is_its_kind_to_the_harness(tmp_path: Path, persona: str) -> None:
    (p,) = parse(tmp_path, {"name": "svc", "kind": persona}).providers
    assert (p.kind, p.persona, p.wire) == (PERSONA_KINDS[persona], persona, persona)
    # The provider process is started as the persona, over its kind.
    assert p.start_options() == {"persona": persona}


def test_a_kind_has_no_persona_and_no_start_options(tmp_path: Path) -> None:
    (p,) = parse(tmp_path, {"name": "svc", "kind": "plain"}).providers
    assert (p.kind, p.persona, p.start_options()) == ("plain", None, {})


def test_a_misspelt_kind_is_one_line_with_a_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        parse(tmp_path, {"name": "svc", "kind": "strpie"})
    text = str(err.value)
    assert "\n" not in text
    assert 'providers[0].kind is "strpie" (did you mean "stripe"?)' in text
    assert "use one of idempotent, plain, unqueryable, stripe" in text
    with pytest.raises(ConfigError, match=r'is "zzz"; use one of') as err:
        parse(tmp_path, {"name": "svc", "kind": "zzz"})


def test_the_cli_exits_2_on_a_misspelt_kind(tmp_path: Path) -> None:
    (tmp_path / "crashpoint.toml").write_text(
        '[target]\nname = "w"\ncommand = ["python3", "w.py"]\n'
        'enqueue = ["python3", "e.py", "{job_id}", "{payload_file}"]\n'
        '[[providers]]\nname = "billing"\nkind = "slak"\n'
    )
    result = CliRunner().invoke(
        main, ["check-config", "-c", str(tmp_path / "crashpoint.toml")], prog_name="crashpoint"
    )
    assert result.exit_code == 2, result.output
    assert 'did you mean "slack"?' in result.output


def test_env_names_a_variable_that_gets_the_sdk_base_url(tmp_path: Path) -> None:
    cfg = parse(
        tmp_path,
        {"name": "chat", "kind": "slack", "env": "SLACK_BASE"},
        {"name": "model", "kind": "openai", "env": "OPENAI_BASE_URL"},
        {"name": "pay", "kind": "stripe", "env": "STRIPE_API_BASE"},
        {"name": "plain", "kind": "plain", "env": "PLAIN_URL"},
    )
    adapter = CommandAdapter(cfg, trial_dir=tmp_path)
    env = {
        f"CRASHPOINT_PROVIDER_{n}_URL": f"http://127.0.0.1:{i}"
        for i, n in enumerate(("CHAT", "MODEL", "PAY", "PLAIN"), start=9001)
    }
    assert adapter.url_aliases(env) == {
        "SLACK_BASE": "http://127.0.0.1:9001/api/",
        "OPENAI_BASE_URL": "http://127.0.0.1:9002/v1",
        "STRIPE_API_BASE": "http://127.0.0.1:9003",
        "PLAIN_URL": "http://127.0.0.1:9004",
    }
    assert sdk_base_url(None, "http://x") == "http://x"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"env": "1BAD"}, "is not an environment variable name"),
        ({"env": "CRASHPOINT_X"}, "a name the harness sets itself"),
        ({"env": 3}, "must be a non-empty string"),
        ({"transport": "mcp"}, "speaks HTTP only"),
    ],
)
def test_env_and_transport_mistakes_are_one_line(
    tmp_path: Path, entry: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse(tmp_path, {"name": "pay", "kind": "stripe", **entry})
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_one_env_for_two_providers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is given to two providers"):
        parse(
            tmp_path,
            {"name": "a", "kind": "stripe", "env": "BASE"},
            {"name": "b", "kind": "resend", "env": "BASE"},
        )


@pytest.mark.parametrize("persona", sorted(PERSONA_KINDS))
@pytest.mark.parametrize("lang", ["python", "node", "go"])
def test_init_writes_the_persona_and_its_base_url_line(
    tmp_path: Path, persona: str, lang: str
) -> None:
    text = render(plan(tmp_path, lang, [f"billing={persona}"]))
    doc = tomllib.loads(text)
    (block,) = doc["providers"]
    assert (block["name"], block["kind"]) == ("billing", persona)
    # Only an SDK that reads a variable of its own gets env written for it.
    assert block.get("env") in (None, "OPENAI_BASE_URL", "RESEND_API_URL", "RESEND_BASE_URL")
    assert GUIDES[persona].write in text
    if lang == "go":
        assert "Point your HTTP client at CRASHPOINT_PROVIDER_BILLING_URL" in text
    else:
        assert "CRASHPOINT_PROVIDER_BILLING_URL" in text.split(f'kind = "{persona}"')[1]
    (tmp_path / "crashpoint.toml").write_text(text)
    (p,) = load_config(tmp_path / "crashpoint.toml").providers
    assert (p.persona, p.kind) == (persona, PERSONA_KINDS[persona])


def test_init_base_url_lines_are_each_sdks_own(tmp_path: Path) -> None:
    py = render(plan(tmp_path, "python", ["stripe", "slack", "openai"]))
    assert 'stripe.api_base = os.environ["CRASHPOINT_PROVIDER_BILLING_URL"]' in py
    assert 'WebClient(token, base_url=os.environ["CRASHPOINT_PROVIDER_SLACK_URL"] + "/api/")' in py
    assert 'env = "OPENAI_BASE_URL"' in py
    node = render(plan(tmp_path, "node", ["stripe", "resend"]))
    assert "new Stripe(key, { host: u.hostname, port: u.port" in node
    assert 'env = "RESEND_BASE_URL"' in node
    names = [p["name"] for p in tomllib.loads(py)["providers"]]
    assert names == ["billing", "slack", "openai"]


def test_init_refuses_an_unknown_or_repeated_provider(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'sendgrid'"):
        plan(tmp_path, "python", ["sendgird"])
    with pytest.raises(ConfigError, match="declared already"):
        plan(tmp_path, "python", ["a=stripe", "a=slack"])


def test_init_cli_takes_repeated_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "worker.py").write_text("")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["init", "--provider", "stripe", "--provider", "mail=sendgrid"]
    )
    assert result.exit_code == 0, result.output
    providers = load_config(tmp_path / "crashpoint.toml").providers
    assert [(p.name, p.persona) for p in providers] == [("billing", "stripe"), ("mail", "sendgrid")]


class Arrival:
    def __init__(self, **kw: Any) -> None:
        self.kind, self.method, self.path, self.status = "write", "POST", "/v1/payment_intents", 200
        self.job_id, self.idempotency_key, self.client_marker = JOB, JOB, None
        self.__dict__.update(kw)


class Effect:
    job_id, provider = JOB, "billing"


def stripe_seen(tmp_path: Path, **kw: Any) -> Seen:
    cfg = parse(tmp_path, {"name": "billing", "kind": "stripe", "env": "STRIPE_API_BASE"})
    lookup = Arrival(kind="lookup", method="GET", path="/v1/payment_intents/search")
    seen = Seen(
        config=cfg,
        waited_s=1.0,
        arrivals={"billing": [Arrival(), lookup]},
        effects={"billing": [Effect()]},
        hits=[(p, JOB) for p in ("after_claim", "before_external_call", "after_external_call")],
    )
    return replace(seen, **kw)


def test_check_config_names_the_persona_calls(tmp_path: Path) -> None:
    seen = stripe_seen(tmp_path)
    assert "billing (stripe over idempotent)" in static_lines(seen.config)[0].text
    lines = judge(seen)
    assert all(line.mark != FAIL for line in lines), lines
    texts = [line.text for line in lines if line.mark == OK]
    assert (
        "stripe: POST /v1/payment_intents (write), GET /v1/payment_intents/search (lookup)" in texts
    )
    assert any("(or STRIPE_API_BASE)" in t for t in texts)


def test_check_config_says_when_the_worker_called_an_unserved_path(tmp_path: Path) -> None:
    tapped = {"billing": [Tapped("POST", "/v1/charges", 404)]}
    seen = stripe_seen(tmp_path, arrivals={"billing": []}, effects={}, tapped=tapped)
    lines = judge(seen)
    unserved = next(line for line in lines if "/v1/charges" in line.text)
    assert unserved.mark == FAIL
    assert "the stripe persona does not serve (404)" in unserved.text
    assert "POST /v1/payment_intents" in unserved.fix
    assert any("served none of its requests" in line.text for line in lines)


def test_check_config_says_where_a_persona_wants_the_job_id(tmp_path: Path) -> None:
    seen = stripe_seen(tmp_path, arrivals={"billing": [Arrival(job_id=None)]})
    line = next(x for x in judge(seen) if "carries job_id" in x.text)
    assert line.mark == FAIL
    assert "metadata[job_id]" in line.fix


def test_a_provider_decl_default_is_unchanged(tmp_path: Path) -> None:
    assert ProviderDecl("b", "idempotent").start_options() == {}


def test_the_trace_rows_name_the_persona_and_the_endpoint(tmp_path: Path) -> None:
    from reports import load_results
    from reports.desk import trace_of

    fixture = Path(__file__).parents[1] / "fixtures" / "results" / "run_small.json"
    doc = json.loads(fixture.read_text(encoding="utf-8"))
    trial = doc["trials"][0]
    source = "provider:billing"
    write = {"id": 7, "kind": "write", "method": "POST", "path": "/v1/payment_intents"}
    trial["events"] = [
        {"t": 0.1, "source": source, "kind": "arrival", "job": JOB, "fields": write},
        {"t": 0.2, "source": source, "kind": "commit", "job": JOB, "fields": {"arrival_id": 7}},
    ]
    trial.update(provider_name="billing", persona="stripe")
    trial["trace"] = [{"job": JOB, "provider": "billing", "event": 1}]
    (tmp_path / "results.json").write_text(json.dumps(doc))
    loaded = next(t for t in load_results(tmp_path / "results.json").trials if t.extra.get("trace"))
    (row,) = trace_of(loaded, "run")
    assert (row.endpoint, row.persona) == ("POST /v1/payment_intents", "stripe")
    assert loaded.provider_label == f"billing (stripe over {trial['provider']})"
