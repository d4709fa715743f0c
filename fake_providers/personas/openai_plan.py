"""What the scripted model answers: a job's plan, read off the conversation it is sent.

A pure function of the request (and of the re-plan number the persona hands it), so the
same job asked the same way gets the same tool calls, argument bytes included: the
model in a trial is scripted, never sampled. The job's document travels in a user
message as JSON (``{"job_id": ..., "charge": {...}}`` or the harness's envelope
``{"job_id", "provider", "body": {...}}``); its fields named like the declared tools,
or its ``plan`` list, are the calls. See docs/providers.md ("openai").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_providers.problems import Problem

#: The harness's job ids, found in free text when no JSON document carries one.
JOB_PATTERN = re.compile(r"\bj-\d{4,}\b")
#: Argument fields a ``replan_changed`` re-plan redirects (the effect's recipient).
RECIPIENT_FIELDS = ("customer", "channel", "to", "recipient", "email")
#: The suffix a ``replan_changed`` re-plan appends to a recipient.
RECIPIENT_SUFFIX = "-replanned"
#: The call ids this persona hands out: ``call_<re-plan>_<index>_<job digest>``.
_CALL_ID = re.compile(r"^call_(\d+)_(\d+)_[0-9a-f]{10}$")


@dataclass(frozen=True)
class Call:
    """One tool call: its id, the tool's name and the arguments as the JSON string sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Conversation:
    """What a chat-completions request says, read into what the script needs."""

    job_id: str | None
    #: The job's document (its body), or None when only an id was found in free text.
    job: Mapping[str, Any] | None
    #: Declared function tools, in the order declared.
    tools: tuple[str, ...]
    #: Tool calls assistant messages made so far, and the ids tool messages answered.
    calls: tuple[tuple[str, str], ...]
    answered: frozenset[str]

    @property
    def opening(self) -> bool:
        """No tool call made yet: the first ask of a job (or a retry starting over)."""
        return not self.calls


def read(body: Mapping[str, Any]) -> Conversation:
    """The conversation in a chat-completions body, or a 400 naming what is wrong."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages", "'messages' must be a non-empty array of message objects")
    if body.get("stream"):
        raise _bad("stream", "streaming is not supported by this model; call without stream")
    tools = _tools(body.get("tools"))
    job_id: str | None = None
    job: Mapping[str, Any] | None = None
    calls: list[tuple[str, str]] = []
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages.[{i}]", f"messages[{i}] must be an object with a 'role'")
        role = m["role"]
        if role == "user" and job is None:
            job_id, job = _job_in(_text(m.get("content")), job_id)
        elif role == "assistant":
            for c in m.get("tool_calls") or ():
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(c.get("id"), str):
                    raise _bad(f"messages.[{i}].tool_calls", "each tool call needs id, function")
                calls.append((c["id"], str(fn.get("name"))))
        elif role == "tool" and isinstance(m.get("tool_call_id"), str):
            answered.add(m["tool_call_id"])
    missing = [cid for cid, _ in calls if cid not in answered]
    if missing:
        raise _bad(
            "messages",
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {', '.join(missing)}",
        )
    return Conversation(job_id, job, tools, tuple(calls), frozenset(answered))


def plan(convo: Conversation, *, replan: int = 0, changed: bool = False) -> tuple[Call, ...]:
    """The tool calls for an opening request: one per declared tool the job names.

    ``replan`` > 0 is the job's n-th re-plan: each call's arguments come with their keys
    in reverse order; ``changed`` also adds 1 to every integer ``amount`` and appends
    ``-replanned`` to every recipient field (:data:`RECIPIENT_FIELDS`).
    """
    if convo.job is None or convo.job_id is None or not convo.tools:
        return ()
    wanted = _planned(convo.job, convo.tools)
    digest = hashlib.sha256(convo.job_id.encode()).hexdigest()[:10]
    calls = []
    for i, (name, args) in enumerate(wanted):
        if changed:
            args = _changed(args)
        items = list(args.items())
        if replan:
            items.reverse()
        text = json.dumps(dict(items), separators=(",", ":"), ensure_ascii=False)
        calls.append(Call(f"call_{replan}_{i}_{digest}", name, text))
    return tuple(calls)


def final_text(convo: Conversation) -> str:
    """The closing answer, worded by the re-plan its calls carry (so a retry reads apart)."""
    job = convo.job_id or "(no job id)"
    if not convo.calls:
        return f"Job {job}: nothing to do; no declared tool matches the job."
    names = ", ".join(name for _, name in convo.calls)
    replan = replan_of(convo)
    if replan:
        return f"Re-planned job {job} (re-plan {replan}) finished after calling {names}."
    return f"Job {job} is done: called {names}."


def replan_of(convo: Conversation) -> int:
    """The re-plan number the conversation's calls were made under (0: the first plan)."""
    for cid, _ in convo.calls:
        m = _CALL_ID.match(cid)
        if m is not None:
            return int(m.group(1))
    return 0


def _planned(job: Mapping[str, Any], tools: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    steps = job.get("plan")
    if steps is None:
        return [(t, dict(job[t])) for t in tools if isinstance(job.get(t), dict)]
    if not isinstance(steps, list):
        raise _bad("messages", f"the job's 'plan' is a {type(steps).__name__}; send a list")
    out = []
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("tool"), str):
            raise _bad("messages", f"plan[{n}] must be {{'tool': NAME, 'arguments': {{...}}}}")
        args = step.get("arguments", {})
        if step["tool"] not in tools or not isinstance(args, dict):
            raise _bad(
                "tools",
                f"plan[{n}] calls {step['tool']!r} with {type(args).__name__} arguments; "
                f"declare it among the tools ({', '.join(tools) or 'none declared'}) "
                f"and give an object of arguments",
            )
        out.append((step["tool"], dict(args)))
    return out


def _changed(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for name, value in args.items():
        if name == "amount" and isinstance(value, int) and not isinstance(value, bool):
            out[name] = value + 1
        elif name in RECIPIENT_FIELDS and isinstance(value, str):
            out[name] = value + RECIPIENT_SUFFIX
    return out


def _tools(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad("tools", "'tools' must be an array of {'type': 'function', 'function': ...}")
    names = []
    for i, t in enumerate(raw):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"tools.[{i}]", f"tools[{i}] must be a function tool with a name")
        names.append(fn["name"])
    return tuple(names)


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _job_in(text: str, known: str | None) -> tuple[str | None, Mapping[str, Any] | None]:
    """The job's id and document in a user message's text (the document may be all of
    it, or one JSON object inside prose)."""
    for candidate in (text, text[text.find("{") : text.rfind("}") + 1]):
        try:
            doc = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(doc, dict):
            body = doc.get("body")
            if isinstance(body, dict) and isinstance(body.get("job_id"), str):
                doc = body  # the harness's envelope: {"job_id", "provider", "body"}
            if isinstance(doc.get("job_id"), str):
                return doc["job_id"], doc
    found = JOB_PATTERN.search(text)
    return (found.group(0) if found else known), None


class BadParam(Problem):
    """A 400 that names the request field at fault, as OpenAI's ``error.param`` does."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(400, message, code="invalid_request")
        self.param = param


def _bad(param: str, message: str) -> BadParam:
    return BadParam(param, message)
