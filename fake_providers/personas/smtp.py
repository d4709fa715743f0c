"""Plain SMTP in front of the unqueryable kind: every message accepted at ``DATA`` is an
effect, and nothing can be looked up afterwards.

The wire is served by :mod:`fake_providers.smtp` (an aiosmtpd listener beside the
provider's HTTP server, which keeps the control and oracle APIs); this module is what the
persona says about a message, with no sockets: where the job and the worker's own name
for the message are, what "the same message" means (the fingerprint), and the reply
lines the SMTP client reads.

- **Job**: the ``X-Crashpoint-Job`` header (required: without it, ``554 5.6.0``).
- **Marker**: the ``Message-ID`` header, the name the worker chose for the message,
  recorded as the arrival's and effect's ``client_marker``: SMTP keeps no idempotency key,
  so a second message under the same Message-ID is a second email, as at a real relay.
- **Fingerprint**: the envelope (MAIL FROM, the sorted RCPT TOs), the Subject and each
  leaf MIME part's type and decoded content. Left out: what a client makes up per send
  (Date, Message-ID, MIME boundaries) and the attempt's own headers (``X-Worker-Id``,
  ``X-Fencing-Token``), so a message sent again unchanged has the same fingerprint.
- **Headers read as the HTTP ones**: ``X-Worker-Id``, ``X-Fencing-Token`` and
  ``X-Crashpoint-Identity`` in the message are what those request headers are over HTTP.
"""

from __future__ import annotations

import email.parser
import email.policy
from collections.abc import Mapping
from email.message import Message
from typing import Any

from fake_providers.messages import Reply, Request
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.problems import Problem

#: The arrival's method and path for a message (an HTTP write has ``POST /v1/sends``).
METHOD = "SMTP"
PATH = "DATA"
JOB_HEADER = "X-Crashpoint-Job"
#: Message headers that carry what an HTTP write carries in its request headers.
REQUEST_HEADERS = ("X-Worker-Id", "X-Fencing-Token", "X-Crashpoint-Identity")
#: The persona's resource name in the store's objects.
RESOURCE = "message"

#: A provider problem's code -> the SMTP reply (code and enhanced status) it is sent as.
_BY_CODE: dict[str, tuple[int, str]] = {
    # A 4xx: transient, nothing was committed, and the client may send again.
    "injected_failure": (451, "4.3.0"),
    "provider_bug": (451, "4.3.0"),
    "session_expired": (535, "5.7.8"),
    "identity_changed": (550, "5.7.1"),
}


class SmtpProblem(Problem):
    """A message the persona refuses, with the SMTP reply it is refused with."""

    def __init__(self, reply: int, enhanced: str, detail: str) -> None:
        # The status is the reply code: what the arrival records is what the client read.
        super().__init__(reply, detail, code="smtp_refused")
        self.reply = reply
        self.enhanced = enhanced


class Smtp:
    name = "smtp"
    kind = "unqueryable"
    #: SMTP has no replay: every accepted message is a new one.
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        # The business API is SMTP, on its own port; over HTTP only the control and
        # oracle APIs answer (and a 404 names the SMTP address for anything else).
        return None

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        external_id = str(effect["external_id"])
        obj = {
            "object": RESOURCE,
            "id": external_id,
            "message_id": parsed.marker,
            "mail_from": parsed.payload.get("from"),
            "rcpt_to": parsed.payload.get("to"),
            "subject": parsed.payload.get("subject"),
        }
        line = f"250 2.0.0 OK: queued as {external_id}"
        return Created(250, line.encode(), external_id, obj)

    def error(self, problem: Problem, *, path: str) -> Reply:
        if path != PATH:
            return Reply.problem(problem, instance=path)
        code, enhanced = smtp_status(problem)
        return reply_line(code, enhanced, problem.detail)


def smtp_status(problem: Problem) -> tuple[int, str]:
    """The SMTP reply code and enhanced status ``problem`` is answered with."""
    if isinstance(problem, SmtpProblem):
        return problem.reply, problem.enhanced
    known = _BY_CODE.get(problem.code)
    if known is not None:
        return known
    if problem.status >= 500:
        return 451, "4.3.0"
    return 554, "5.6.0"


def reply_line(code: int, enhanced: str, text: str) -> Reply:
    """One SMTP reply line (``451 4.3.0 text``) as a reply; the arrival records ``code``."""
    flat = " ".join(text.split())
    # A reply line is ASCII and at most 512 octets with its CRLF (RFC 5321 4.5.3.1.5).
    line = f"{code} {enhanced} {flat}".encode("ascii", "replace")[:500]
    return Reply(code, line, "text/plain")


def parse_message(content: bytes, *, mail_from: str, rcpt_tos: list[str]) -> Parsed | Problem:
    """A message as received at ``DATA``, read into the job, the marker (its Message-ID)
    and the fingerprinted payload."""
    msg = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(content)
    job = _header(msg, JOB_HEADER)
    if not job:
        return SmtpProblem(
            554,
            "5.6.0",
            f"the message has no {JOB_HEADER} header; set it to the job's id so the "
            "provider can tie the message to its job",
        )
    payload: dict[str, Any] = {
        "from": mail_from,
        "to": sorted(rcpt_tos),
        "subject": _header(msg, "Subject"),
        "parts": _parts(msg),
    }
    return Parsed(
        payload,
        job,
        marker=_header(msg, "Message-ID"),
        resource=RESOURCE,
        extra={"mail_from": mail_from, "rcpt_tos": list(rcpt_tos)},
    )


def request_headers(content: bytes) -> dict[str, str]:
    """The message headers that stand for the HTTP request headers a write carries
    (lower-case names, as :class:`Request` keeps them)."""
    msg = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(
        content, headersonly=True
    )
    out = {}
    for name in REQUEST_HEADERS:
        value = _header(msg, name)
        if value:
            out[name.lower()] = value
    return out


def _header(msg: Message, name: str) -> str | None:
    value = msg.get(name)
    if value is None:
        return None
    # compat32 keeps undecodable bytes as a Header object; str() of it is still text.
    return " ".join(str(value).split()) or None


def _parts(msg: Message) -> list[list[str]]:
    """Each leaf part's content type and decoded content: a multipart's boundaries are
    drawn afresh for every send, and must not make one message two."""
    out = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        raw = part.get_payload(decode=True)
        data = raw if isinstance(raw, bytes) else b""
        charset = part.get_content_charset() or "utf-8"
        try:
            text = data.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            text = data.decode("utf-8", errors="replace")
        out.append([part.get_content_type(), text.replace("\r\n", "\n")])
    return out


PERSONA = Smtp()
