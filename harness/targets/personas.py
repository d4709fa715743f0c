"""What the harness says about each persona to a worker's author: where its SDK's base
URL goes, which call is its write, and where the job's id rides.

One table, so ``crashpoint init`` (the comment it writes), ``check-config`` (its hints)
and the worker's environment (``[[providers]] env``) agree. The wire formats themselves
are the personas' (``fake_providers/personas``); docs/providers.md has the whole story.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.vocabulary import PERSONA_KINDS


@dataclass(frozen=True)
class PersonaGuide:
    """One persona, as a worker's author needs it."""

    #: What goes after the provider's URL to make the base URL its SDK expects: Slack's
    #: SDKs call ``base + "chat.postMessage"``, OpenAI's ``base + "/chat/completions"``.
    suffix: str
    #: The write a job makes, as ``METHOD /path``.
    write: str
    #: Where the persona reads the job's id (and the key or marker) from that write.
    job_id: str
    #: How each language's SDK is pointed at ``{var}``'s URL (``{suffix}`` appended).
    python: str
    node: str
    #: The variable the SDK reads its base URL from by itself, per language; None: none.
    sdk_env: tuple[tuple[str, str], ...] = ()


GUIDES: dict[str, PersonaGuide] = {
    "stripe": PersonaGuide(
        suffix="",
        write="POST /v1/payment_intents",
        job_id="metadata[job_id]; the Idempotency-Key header is the key (one per job)",
        python='stripe.api_base = os.environ["{var}"]',
        node=(
            "const u = new URL(process.env.{var}); new Stripe(key, {{ host: u.hostname, "
            "port: u.port, protocol: u.protocol.slice(0, -1) }})"
        ),
    ),
    "slack": PersonaGuide(
        suffix="/api/",
        write="POST /api/chat.postMessage",
        job_id="metadata.event_payload.job_id, and a client_marker beside it to look it up",
        python='WebClient(token, base_url=os.environ["{var}"] + "/api/")',
        node="new WebClient(token, {{ slackApiUrl: process.env.{var} + '/api/' }})",
    ),
    "sendgrid": PersonaGuide(
        suffix="",
        write="POST /v3/mail/send",
        job_id="custom_args.job_id (and custom_args.client_marker)",
        python='SendGridAPIClient(api_key, host=os.environ["{var}"])',
        node="client.setDefaultRequest('baseUrl', process.env.{var}) (@sendgrid/client)",
    ),
    "resend": PersonaGuide(
        suffix="",
        write="POST /emails",
        job_id="the tag named job_id in tags; the Idempotency-Key header is the key",
        python='resend.api_url = os.environ["{var}"]',
        node="new Resend(key, {{ baseUrl: process.env.{var} }})",
        sdk_env=(("python", "RESEND_API_URL"), ("node", "RESEND_BASE_URL")),
    ),
    "github": PersonaGuide(
        suffix="",
        write="POST /repos/{owner}/{repo}/issues",
        job_id="a line 'crashpoint-job: J' and 'crashpoint-marker: M' in the issue body",
        python='GitHub(token, base_url=os.environ["{var}"])  # githubkit',
        node="new Octokit({{ baseUrl: process.env.{var} }})",
    ),
    "openai": PersonaGuide(
        suffix="/v1",
        write="POST /v1/chat/completions",
        job_id="the job's id in the messages (the model plans; it commits nothing)",
        python='OpenAI(base_url=os.environ["{var}"] + "/v1")',
        node="new OpenAI({{ baseURL: process.env.{var} + '/v1' }})",
        sdk_env=(("python", "OPENAI_BASE_URL"), ("node", "OPENAI_BASE_URL")),
    ),
    "smtp": PersonaGuide(
        suffix="",
        write="an SMTP message (MAIL FROM, RCPT TO, DATA)",
        job_id="the X-Crashpoint-Job header; the Message-ID header is the marker (one per job)",
        python='u = urlsplit(os.environ["{var}"]); smtplib.SMTP(u.hostname, u.port, timeout=10)',
        node="nodemailer.createTransport(process.env.{var})  // smtp://127.0.0.1:PORT",
    ),
    "http": PersonaGuide(
        suffix="",
        write="its routes.create",
        job_id="routes.create.job, the key in routes.create.key",
        python='base = os.environ["{var}"]  # httpx.post(base + "/orders", json=...)',
        node="const base = process.env.{var}; // fetch(base + '/orders', ...)",
    ),
}
assert set(GUIDES) == set(PERSONA_KINDS), "every persona needs a guide"


def sdk_base_url(persona: str | None, url: str) -> str:
    """The base URL ``persona``'s SDK expects for a provider at ``url`` (``url`` itself
    for a plain kind)."""
    guide = GUIDES.get(persona or "")
    return url + guide.suffix if guide is not None else url


def base_url_line(persona: str, lang: str, var: str) -> str | None:
    """How a ``lang`` worker points ``persona``'s SDK at the URL in ``var``; None for a
    language without an official SDK here (Go, shell: point the HTTP client at it)."""
    guide = GUIDES[persona]
    template = {"python": guide.python, "node": guide.node}.get(lang)
    return template.format(var=var) if template is not None else None


def sdk_env(persona: str, lang: str) -> str | None:
    """The variable ``persona``'s ``lang`` SDK reads its base URL from by itself."""
    return dict(GUIDES[persona].sdk_env).get(lang)


def write_hint(persona: str) -> str:
    """The write the persona expects, and where its job id goes."""
    guide = GUIDES[persona]
    return f"{guide.write} with the job's id in {guide.job_id}"
