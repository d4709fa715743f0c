"""GitHub's REST wire: the job and marker convention, objects and error envelopes.

The job and the marker are read from the text a worker writes (issue or comment body),
as GitHub keeps nothing else a worker could tag a write with: ``crashpoint-marker: M``
and ``crashpoint-job: J``, on a line of their own or inside an HTML comment (which
GitHub does not render), e.g. ``<!-- crashpoint-marker: m-7f3a crashpoint-job: j-0001 -->``.
Without ``crashpoint-job:``, the first token shaped like the harness's job ids
(``j-0001``) is the job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fake_providers.messages import Reply
from fake_providers.problems import Problem

MARKER_RE = re.compile(r"crashpoint-marker:\s*([A-Za-z0-9._:/-]+)")
JOB_RE = re.compile(r"crashpoint-job:\s*([A-Za-z0-9._:/-]+)")
JOB_ID_RE = re.compile(r"\bj-\d{4,}\b")
DOCS = "https://docs.github.com/rest"
_MESSAGES = {
    400: "Problems parsing JSON",
    401: "Bad credentials",
    403: "Resource not accessible by integration",
    404: "Not Found",
    405: "Not Found",
    409: "Conflict",
    415: "Unsupported Media Type",
    422: "Validation Failed",
    429: "You have exceeded a secondary rate limit. Please wait a few minutes before you "
    "try again.",
    500: "Server Error",
    502: "Server Error",
    503: "Service Unavailable",
}


class GitHubProblem(Problem):
    """A Problem with GitHub's own ``message`` and validation ``errors``."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        message: str | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(status, detail)
        self.message = message
        self.errors = errors


def job_and_marker(text: str) -> tuple[str | None, str | None]:
    """The job id and the marker a body carries (by the convention above)."""
    marker = MARKER_RE.search(text)
    job = JOB_RE.search(text) or JOB_ID_RE.search(text)
    return (
        (job.group(1) if job.re is JOB_RE else job.group(0)) if job else None,
        marker.group(1) if marker else None,
    )


def iso(t_wall: float) -> str:
    return datetime.fromtimestamp(t_wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(prefix: str, number: int) -> str:
    return f"{prefix}_kwCP{number:08d}"


def user(api: str) -> dict[str, Any]:
    """The account every write is made as (one token, one user)."""
    login = "crashpoint-bot"
    url = f"{api}/users/{login}"
    return {
        "login": login,
        "id": 1,
        "node_id": "U_kgCP00000001",
        "avatar_url": "https://avatars.githubusercontent.com/u/1?v=4",
        "gravatar_id": "",
        "url": url,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": "User",
        "site_admin": False,
    }


def issue(
    *, api: str, repo: str, number: int, args: Mapping[str, Any], t_wall: float
) -> dict[str, Any]:
    url = f"{api}/repos/{repo}/issues/{number}"
    labels = [
        {
            "id": 1000 + i,
            "node_id": node_id("LA", 1000 + i),
            "url": f"{api}/repos/{repo}/labels/{name}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
        }
        for i, name in enumerate(args.get("labels") or [])
    ]
    return {
        "id": number,
        "node_id": node_id("I", number),
        "url": url,
        "repository_url": f"{api}/repos/{repo}",
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": f"https://github.com/{repo}/issues/{number}",
        "number": number,
        "state": "open",
        "state_reason": None,
        "title": args.get("title"),
        "body": args.get("body"),
        "user": user(api),
        "labels": labels,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "locked": False,
        "active_lock_reason": None,
        "comments": 0,
        "closed_at": None,
        "created_at": iso(t_wall),
        "updated_at": iso(t_wall),
        "closed_by": None,
        "author_association": "OWNER",
    }


def comment(
    *, api: str, repo: str, number: int, comment_id: int, body: str, t_wall: float
) -> dict[str, Any]:
    return {
        "id": comment_id,
        "node_id": node_id("IC", comment_id),
        "url": f"{api}/repos/{repo}/issues/comments/{comment_id}",
        "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{comment_id}",
        "body": body,
        "user": user(api),
        "created_at": iso(t_wall),
        "updated_at": iso(t_wall),
        "issue_url": f"{api}/repos/{repo}/issues/{number}",
        "author_association": "OWNER",
    }


def error_reply(problem: Problem) -> Reply:
    """``problem`` in GitHub's envelope: ``{"message", "documentation_url", "status"}``."""
    status = 404 if problem.status == 405 else problem.status
    message = getattr(problem, "message", None) or _MESSAGES.get(status, "Error")
    doc: dict[str, Any] = {"message": message, "documentation_url": DOCS, "status": str(status)}
    errors = getattr(problem, "errors", None)
    if errors:
        doc["errors"] = errors
    elif status < 500 and status != 429:
        doc["detail"] = problem.detail
    headers = tuple(h for h in problem.headers if h[0].lower() != "allow")
    if status == 429:
        headers = (*headers, ("Retry-After", "1"))
    return Reply.json(status, doc, headers=headers)
