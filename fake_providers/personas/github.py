"""GitHub's REST API (issues, comments, issue search) in front of the plain kind.

Creating an issue (``POST /repos/{owner}/{repo}/issues``) or a comment (``POST
/repos/{owner}/{repo}/issues/{number}/comments``) is the write: GitHub has no
idempotency, so every call is one more effect. The job and the marker are read from
the body text (see ``github_wire``); the marker is left out of the fingerprint.
``GET /search/issues?q=<marker> repo:o/r`` is the lookup a worker reconciles with,
recorded for the job whose writes carried that marker; ``GET
/repos/{owner}/{repo}/issues/{number}`` is a lookup for the issue's own job.

Issue numbers and comment ids are the effect's id: unique across the provider, so
within a repository too (GitHub's numbers skip as well, where pull requests took them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fake_providers.messages import Reply, Request, first_param, parse_object
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.personas.github_wire import (
    JOB_ID_RE,
    GitHubProblem,
    comment,
    error_reply,
    issue,
    job_and_marker,
)
from fake_providers.problems import Problem

_ISSUES = re.compile(r"^/repos/([^/]+)/([^/]+)/issues$")
_ISSUE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d{1,18})$")
_COMMENTS = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d{1,18})/comments$")
_TERMS = re.compile(r'"([^"]*)"|(\S+)')
_QUALIFIERS = ("repo", "in", "is", "type", "state", "label", "author")


def _api(req: Request) -> str:
    """The base URL objects link to: the provider itself, as the client reached it."""
    return f"http://{req.headers.get('host', '127.0.0.1')}"


class GitHubPersona:
    name = "github"
    kind = "plain"
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        if m := _ISSUES.match(path):
            repo = f"{m[1]}/{m[2]}"
            return {"POST": lambda: host.write(req, path, self._parse(host, req, repo, None))}
        if m := _COMMENTS.match(path):
            repo, number = f"{m[1]}/{m[2]}", int(m[3])
            return {"POST": lambda: host.write(req, path, self._parse(host, req, repo, number))}
        if m := _ISSUE.match(path):
            repo, number = f"{m[1]}/{m[2]}", int(m[3])
            return {"GET": lambda: self._get_issue(host, req, path, repo, number)}
        if path == "/search/issues":
            return {"GET": lambda: self._search(host, req, path, query)}
        return None

    # -- writes ------------------------------------------------------------------------

    def _parse(self, host: Host, req: Request, repo: str, number: int | None) -> Parsed | Problem:
        try:
            return self._parse_write(host, req, repo, number)
        except Problem as p:
            return p

    def _parse_write(self, host: Host, req: Request, repo: str, number: int | None) -> Parsed:
        if not req.headers.get("authorization", "").strip():
            raise GitHubProblem(
                401, "no Authorization header; send a token", message="Requires authentication"
            )
        args = parse_object(req.body)
        resource = "Issue" if number is None else "IssueComment"
        if number is None and not (isinstance(args.get("title"), str) and args["title"]):
            raise _missing(resource, "title", "title is missing; an issue needs one")
        text = args.get("body")
        if number is not None and not (isinstance(text, str) and text):
            raise _missing(resource, "body", "body is missing; a comment needs one")
        if number is not None and not _issue_rows(host, repo, number):
            raise GitHubProblem(404, f"no issue #{number} in {repo}", message="Not Found")
        job_id, marker = job_and_marker(text if isinstance(text, str) else "")
        if job_id is None or marker is None:
            raise GitHubProblem(
                422,
                "the body carries no job id or marker; write '<!-- crashpoint-job: j-0001 "
                "crashpoint-marker: <marker> -->' in it",
                errors=[{"resource": resource, "code": "custom", "field": "body"}],
            )
        payload = dict(args)
        payload["body"] = str(text).replace(marker, "")
        payload["repo"] = repo
        payload["issue_number"] = number
        return Parsed(
            payload=payload,
            job_id=job_id,
            marker=marker,
            resource="issue" if number is None else "comment",
            extra={"api": _api(req), "repo": repo, "number": number, "args": args},
        )

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        extra = parsed.extra
        repo, api, effect_id = extra["repo"], extra["api"], int(effect["id"])
        if extra["number"] is None:
            obj = issue(
                api=api, repo=repo, number=effect_id, args=extra["args"], t_wall=effect["t_wall"]
            )
            object_id = f"{repo}#{effect_id}"
        else:
            obj = comment(
                api=api,
                repo=repo,
                number=extra["number"],
                comment_id=effect_id,
                body=extra["args"]["body"],
                t_wall=effect["t_wall"],
            )
            object_id = f"{repo}#{extra['number']}/comments/{effect_id}"
        body = json.dumps(obj, separators=(",", ":")).encode()
        location = (("Location", obj["url"]),)
        return Created(status=201, body=body, object_id=object_id, obj=obj, headers=location)

    # -- lookups -------------------------------------------------------------------------

    def _get_issue(self, host: Host, req: Request, path: str, repo: str, number: int) -> Reply:
        rows = _issue_rows(host, repo, number)
        row = rows[0] if rows else None

        def answer() -> Reply:
            if row is None:
                raise GitHubProblem(404, f"no issue #{number} in {repo}")
            return Reply(200, row["body"].encode())

        job = row["job_id"] if row else None
        marker = row["client_marker"] if row else None
        return host.lookup(req, path, job_id=job, marker=marker, answer=answer)

    def _search(self, host: Host, req: Request, path: str, query: dict[str, list[str]]) -> Reply:
        q = first_param(query, "q") or ""
        terms, quals = _parse_q(q)
        job, marker = None, None
        for term in terms:
            found = host.store.job_of("client_marker", term)
            if found is not None:
                job, marker = found, term
                break
            if job is None and JOB_ID_RE.fullmatch(term):
                job = term

        def answer() -> Reply:
            if not q.strip():
                raise GitHubProblem(
                    422,
                    "q is missing; search with q='<marker> in:body repo:owner/repo'",
                    errors=[{"resource": "Search", "field": "q", "code": "missing"}],
                )
            items = _matches(host, terms, quals)
            per_page = _bounded(first_param(query, "per_page"), 30, 100)
            page = _bounded(first_param(query, "page"), 1, 1000)
            shown = items[(page - 1) * per_page : page * per_page]
            return Reply.json(
                200,
                {
                    "total_count": len(items),
                    "incomplete_results": False,
                    "search_type": "lexical",  # GitHub's schema of 2026-03-10 requires it
                    "items": [{**i, "score": 1.0} for i in shown],
                },
            )

        return host.lookup(req, path, job_id=job, marker=marker, answer=answer)

    def error(self, problem: Problem, *, path: str) -> Reply:
        return error_reply(problem)


def _missing(resource: str, field: str, detail: str) -> GitHubProblem:
    return GitHubProblem(
        422, detail, errors=[{"resource": resource, "code": "missing_field", "field": field}]
    )


def _issue_rows(host: Host, repo: str, number: int) -> list[dict[str, Any]]:
    return host.store.objects(resource="issue", object_id=f"{repo}#{number}")


def _parse_q(q: str) -> tuple[list[str], dict[str, list[str]]]:
    terms: list[str] = []
    quals: dict[str, list[str]] = {}
    for quoted, word in _TERMS.findall(q):
        name, sep, value = word.partition(":")
        if not quoted and sep and name.lower() in _QUALIFIERS:
            quals.setdefault(name.lower(), []).append(value)
        elif quoted or word:
            terms.append(quoted or word)
    return terms, quals


def _matches(host: Host, terms: list[str], quals: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The issues matching every term in the fields ``in:`` names (all by default)."""
    where = set(quals.get("in", [])) or {"title", "body", "comments"}
    if {"pr", "pull-request"} & set(quals.get("is", []) + quals.get("type", [])):
        return []
    if {"closed"} & set(quals.get("is", []) + quals.get("state", [])):
        return []
    repos = quals.get("repo", [])
    comments = [json.loads(r["body"]) for r in host.store.objects(resource="comment")]
    out = []
    for row in reversed(host.store.objects(resource="issue")):
        doc = json.loads(row["body"])
        repo = row["object_id"].rsplit("#", 1)[0]
        if repos and repo.lower() not in {r.lower() for r in repos}:
            continue
        labels = {label["name"] for label in doc["labels"]}
        if not set(quals.get("label", [])) <= labels:
            continue
        texts = []
        if "title" in where:
            texts.append(doc["title"] or "")
        if "body" in where:
            texts.append(doc["body"] or "")
        if "comments" in where:
            suffix = f"/repos/{repo}/issues/{doc['number']}"
            texts += [c["body"] for c in comments if c["issue_url"].endswith(suffix)]
        text = "\n".join(texts).lower()
        if all(t.lower() in text for t in terms):
            out.append(doc)
    return out


def _bounded(raw: str | None, default: int, most: int) -> int:
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        return default
    return max(1, min(int(raw), most))


PERSONA = GitHubPersona()
